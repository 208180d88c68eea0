#include "db_records.h"

#include "elastic/common/log.h"

namespace elastic::controller::records {
namespace {

SqlValue OrNull(bool present, SqlValue v) { return present ? std::move(v) : SqlValue(nullptr); }

}  // namespace

// ---------------------------------------------------------------- jobs
std::vector<ElasticJob> LoadRunningJobs(Database& db) {
  std::vector<ElasticJob> out;
  db.Run("SELECT data FROM jobs WHERE state = 'running'", {}, [&](sqlite3_stmt* st) {
    out.push_back(ElasticJob::FromJson(nlohmann::json::parse(Database::Text(st, 0))));
  });
  return out;
}

std::vector<ElasticJob> LoadMovingJobs(Database& db) {
  std::vector<ElasticJob> out;
  db.Run("SELECT data FROM jobs WHERE state = 'moving'", {}, [&](sqlite3_stmt* st) {
    out.push_back(ElasticJob::FromJson(nlohmann::json::parse(Database::Text(st, 0))));
  });
  return out;
}

std::set<uint32_t> LoadRestarts(Database& db) {
  std::set<uint32_t> out;
  db.Run("SELECT job_id FROM jobs WHERE state = 'restart'", {},
         [&](sqlite3_stmt* st) { out.insert(static_cast<uint32_t>(Database::Int(st, 0))); });
  return out;
}

void SaveJob(Database& db, const ElasticJob& job, double now) {
  db.Run(
      "INSERT INTO jobs (job_id, uid, user, account, state, registered_at, ended_at, data) VALUES (?,?,?,?,?,?,?,?) "
      "ON CONFLICT(job_id) DO UPDATE SET state = excluded.state, ended_at = excluded.ended_at, data = excluded.data",
      {int64_t{job.id}, int64_t{job.uid}, job.user, job.account, job.state, job.registered_at,
       OrNull(job.state == "ended", now), job.ToJson().dump()});
}

void SeedRunningJob(Database& db, const nlohmann::json& r) {
  db.Run("INSERT INTO jobs (job_id, uid, user, account, state, registered_at, data) VALUES (?,?,?,?,?,?,?)",
         {r.at("id").get<int64_t>(), r.value("uid", int64_t{0}), r.value("user", ""), r.value("account", ""),
          std::string("running"), r.value("registered_at", 0.0), r.dump()});
}

void MarkRestart(Database& db, uint32_t job) {
  db.Run("UPDATE jobs SET state = 'restart' WHERE job_id = ?", {int64_t{job}});
}

void EndRestart(Database& db, uint32_t job) {
  db.Run("UPDATE jobs SET state = 'ended' WHERE job_id = ? AND state = 'restart'", {int64_t{job}});
}

int MaxGroup(Database& db, uint32_t parent) {
  int out = 0;
  db.Run("SELECT COALESCE(MAX(grp), 0) FROM extensions WHERE parent = ?", {int64_t{parent}},
         [&](sqlite3_stmt* st) { out = static_cast<int>(Database::Int(st, 0)); });
  return out;
}

// ---------------------------------------------------------------- extensions
std::vector<Extension> LoadActiveExtensions(Database& db) {
  std::vector<Extension> out;
  db.Run(
      "SELECT id, parent, grp, COALESCE(slurm_job, 0), node, gpu_type, gpus, account, token, state, created_at, "
      "COALESCE(joined_at, 0), COALESCE((SELECT MAX(r.requested_at) FROM rescales r WHERE r.job_id = "
      "extensions.parent AND r.grp = extensions.grp AND r.kind = CASE extensions.state WHEN 'leaving' THEN 'shrink' "
      "ELSE 'grow' END), 0) "
      "FROM extensions WHERE state NOT IN ('left', 'failed', 'cancelled')",
      {}, [&](sqlite3_stmt* st) {
        Extension e;
        e.id = Database::Int(st, 0);
        e.parent = static_cast<uint32_t>(Database::Int(st, 1));
        e.group = static_cast<int>(Database::Int(st, 2));
        e.slurm_job = static_cast<uint32_t>(Database::Int(st, 3));
        e.node = Database::Text(st, 4);
        e.gpu_type = Database::Text(st, 5);
        e.gpus = static_cast<int>(Database::Int(st, 6));
        e.account = Database::Text(st, 7);
        e.token = Database::Text(st, 8);
        const std::string state = Database::Text(st, 9);
        e.created_at = Database::Real(st, 10);
        e.joined_at = Database::Real(st, 11);
        if (auto s = ParseExtState(state)) {
          e.state = *s;
          if (e.state == ExtState::kLeaving) e.leaving_at = Database::Real(st, 12);
          if (e.state == ExtState::kJoining) e.joining_at = Database::Real(st, 12);
          out.push_back(e);
        } else {
          Log(LogLevel::kError, "controller", "extension ", e.id, " of job ", e.parent, " has the unknown state '",
              state, "': ignored");
        }
      });
  return out;
}

int64_t InsertExtension(Database& db, const Extension& e) {
  db.Run(
      "INSERT INTO extensions (parent, grp, slurm_job, node, gpu_type, gpus, account, token, state, created_at) "
      "VALUES (?,?,?,?,?,?,?,?,?,?)",
      {int64_t{e.parent}, int64_t{e.group}, OrNull(e.slurm_job != 0, int64_t{e.slurm_job}), e.node, e.gpu_type,
       int64_t{e.gpus}, e.account, e.token, std::string(ExtStateName(e.state)), e.created_at});
  return db.LastInsertId();
}

void UpdateExtension(Database& db, const Extension& e, double now) {
  db.Run("UPDATE extensions SET slurm_job = ?, state = ?, joined_at = ?, ended_at = COALESCE(ended_at, ?) WHERE id = ?",
         {OrNull(e.slurm_job != 0, int64_t{e.slurm_job}), std::string(ExtStateName(e.state)),
          OrNull(e.joined_at > 0, e.joined_at), OrNull(!e.Active(), now), e.id});
}

void SetExtensionReason(Database& db, int64_t id, const std::string& reason) {
  db.Run("UPDATE extensions SET reason = ? WHERE id = ?", {reason, id});
}

// ---------------------------------------------------------------- commands
int64_t QueueCommand(Database& db, uint32_t job, const nlohmann::json& body, double now) {
  db.Run("INSERT INTO commands (job_id, body, state, created_at) VALUES (?,?, 'queued', ?)",
         {int64_t{job}, body.dump(), now});
  return db.LastInsertId();
}

std::vector<OutstandingCommand> OutstandingCommands(Database& db, uint32_t job) {
  std::vector<OutstandingCommand> out;
  db.Run("SELECT id, body, state FROM commands WHERE job_id = ? AND state IN ('queued', 'delivered') ORDER BY id",
         {int64_t{job}}, [&](sqlite3_stmt* st) {
           out.push_back({Database::Int(st, 0), nlohmann::json::parse(Database::Text(st, 1)),
                          Database::Text(st, 2) == "delivered"});
         });
  return out;
}

void MarkDelivered(Database& db, int64_t command, const nlohmann::json& body) {
  if (body.is_null()) {
    db.Run("UPDATE commands SET state = 'delivered' WHERE id = ? AND state = 'queued'", {command});
  } else {
    db.Run("UPDATE commands SET state = 'delivered', body = ? WHERE id = ? AND state = 'queued'",
           {body.dump(), command});
  }
}

std::optional<StoredCommand> FindCommand(Database& db, int64_t command, uint32_t job) {
  std::optional<StoredCommand> out;
  db.Run("SELECT body, state FROM commands WHERE id = ? AND job_id = ?", {command, int64_t{job}},
         [&](sqlite3_stmt* st) {
           const std::string state = Database::Text(st, 1);
           out = StoredCommand{nlohmann::json::parse(Database::Text(st, 0)), state == "acked" || state == "failed"};
         });
  return out;
}

std::vector<int64_t> PendingCommandBatches(Database& db, uint32_t job) {
  std::vector<int64_t> batches;
  db.Run("SELECT json_extract(body, '$.global_batch') FROM commands WHERE job_id = ? AND state IN ('queued', "
         "'delivered') AND json_extract(body, '$.global_batch') IS NOT NULL ORDER BY id",
         {int64_t{job}}, [&](sqlite3_stmt* st) { batches.push_back(Database::Int(st, 0)); });
  return batches;
}

void FinishCommand(Database& db, int64_t command, bool ok, double now, const std::string& result) {
  db.Run("UPDATE commands SET state = ?, done_at = ?, result = ? WHERE id = ?",
         {std::string(ok ? "acked" : "failed"), now, result, command});
}

void FoldCommand(Database& db, int64_t command, int64_t into, double now) {
  db.Run("UPDATE commands SET state = 'cancelled', done_at = ?, result = ? WHERE id = ? AND state = 'queued'",
         {now, nlohmann::json{{"folded_into", into}}.dump(), command});
}

void CancelCommands(Database& db, uint32_t job) {
  db.Run("UPDATE commands SET state = 'cancelled' WHERE job_id = ? AND state IN ('queued', 'delivered')",
         {int64_t{job}});
}

void CancelGroupCommands(Database& db, uint32_t job, int group) {
  db.Run("UPDATE commands SET state = 'cancelled' WHERE job_id = ? AND state IN ('queued','delivered') AND "
         "json_extract(body, '$.group') = ?",
         {int64_t{job}, int64_t{group}});
}

// ---------------------------------------------------------------- rescales
void StartRescale(Database& db, uint32_t job, const std::string& kind, int group, int from_gpus, int to_gpus,
                  double now) {
  db.Run("INSERT INTO rescales (job_id, kind, grp, from_gpus, to_gpus, requested_at) VALUES (?, ?, ?, ?, ?, ?)",
         {int64_t{job}, kind, int64_t{group}, int64_t{from_gpus}, int64_t{to_gpus}, now});
}

void SetRescaleSizes(Database& db, uint32_t job, int group, const std::string& kind, int from_gpus, int to_gpus) {
  db.Run("UPDATE rescales SET from_gpus = ?, to_gpus = ? WHERE job_id = ? AND grp = ? AND kind = ? AND done_at IS NULL",
         {int64_t{from_gpus}, int64_t{to_gpus}, int64_t{job}, int64_t{group}, kind});
}

void FinishRescale(Database& db, uint32_t job, int group, const std::string& kind, bool ok, double pause_s,
                   const nlohmann::json& phases, double now) {
  db.Run("UPDATE rescales SET done_at = ?, ok = ?, pause_s = ?, phases = ? WHERE job_id = ? AND grp = ? AND kind = ? "
         "AND done_at IS NULL",
         {now, int64_t{ok ? 1 : 0}, pause_s, phases.dump(), int64_t{job}, int64_t{group}, kind});
}

// ---------------------------------------------------------------- intervals
void SetGpus(Database& db, uint32_t job, int gpus, const std::string& gpu_type, double now) {
  db.Transaction([&] {
    db.Run("UPDATE intervals SET end = ? WHERE job_id = ? AND end IS NULL", {now, int64_t{job}});
    if (gpus > 0) {
      db.Run("INSERT INTO intervals (job_id, start, end, gpus, gpu_type) VALUES (?,?,NULL,?,?)",
             {int64_t{job}, now, int64_t{gpus}, gpu_type});
    }
  });
}

// ---------------------------------------------------------------- audit, epochs
void Audit(Database& db, double now, std::optional<uid_t> actor, const std::string& action, uint32_t job,
           const nlohmann::json& detail) {
  db.Run("INSERT INTO audit (at, actor_uid, action, job_id, detail) VALUES (?,?,?,?,?)",
         {now, OrNull(actor.has_value(), int64_t{actor.value_or(0)}), action, OrNull(job != 0, int64_t{job}),
          detail.dump()});
}

void RecordEpoch(Database& db, double started_at, double duration_ms, const std::string& policy, int64_t jobs,
                 std::optional<double> objective, const nlohmann::json& inputs, const nlohmann::json& decisions) {
  db.Run("INSERT INTO epochs (started_at, duration_ms, policy, jobs, objective, inputs, decisions) VALUES (?,?,?,?,?,?,?)",
         {started_at, duration_ms, policy, jobs, OrNull(objective.has_value(), objective.value_or(0.0)), inputs.dump(),
          decisions.dump()});
}

void RecordTrial(Database& db, double now, uint32_t array_job, uint32_t task, uint32_t leader, int64_t steps,
                 const std::string& state, const std::string& result) {
  db.Run("INSERT OR REPLACE INTO trials (array_job, task, leader, steps, state, result, at) VALUES (?,?,?,?,?,?,?)",
         {int64_t{array_job}, int64_t{task}, int64_t{leader}, steps, state, result, now});
}

}  // namespace elastic::controller::records
