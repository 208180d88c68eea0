// The controller: registry, runtime-channel handlers, extension life cycle and the epoch in one
// file of over 600 lines. It is kept whole only until issue 18 splits it along those seams (one
// file each); new concepts go to files of their own (roles.cpp, job_model.cpp).
#include "controller.h"

#include <pwd.h>
#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <tuple>
#include <unordered_map>

#include "elastic/common/exit_codes.h"
#include "elastic/common/log.h"
#include "elastic/common/wire.h"
#include "elastic/optimizer/policy.h"
#include "job_model.h"

namespace elastic::controller {
namespace {

constexpr const char* kComponent = "controller";
constexpr size_t kMaxSamples = 256;

Error Refuse(ErrorKind kind, const std::string& message) { return Error(kind, message); }

uint32_t JobField(const nlohmann::json& msg, const char* key = "job") {
  auto it = msg.find(key);
  if (it == msg.end() || !it->is_number_unsigned() || it->get<uint64_t>() == 0 || it->get<uint64_t>() > 0xfffffff0ULL) {
    throw Refuse(ErrorKind::kProtocol, std::string("message needs a positive integer \"") + key + "\"");
  }
  return it->get<uint32_t>();
}

template <typename T>
T Field(const nlohmann::json& msg, const char* key, T fallback) {
  auto it = msg.find(key);
  if (it == msg.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Refuse(ErrorKind::kProtocol, std::string("field \"") + key + "\" has the wrong type");
  }
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// The noise scale for status: a number, or "inf" when the measured signal is below the noise.
nlohmann::json NoiseScaleJson(const optimizer::EfficiencyParams& p) {
  const double scale = NoiseScale(p);
  return std::isfinite(scale) ? nlohmann::json(scale) : nlohmann::json("inf");
}

}  // namespace

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string NewToken() {
  unsigned char buf[16];
  size_t got = 0;
  while (got < sizeof buf) {
    ssize_t n = getrandom(buf + got, sizeof buf - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kInternal, "getrandom failed");
    }
    got += static_cast<size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : buf) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

// ---------------------------------------------------------------- records
nlohmann::json ElasticJob::ToJson() const {
  nlohmann::json samples_json = nlohmann::json::array();
  for (const auto& s : samples) samples_json.push_back({s.nodes, s.gpus, s.local_batch, s.step_time});
  nlohmann::json grow_batch_json = nlohmann::json::object();
  for (const auto& [gpus, b] : grow_batch) grow_batch_json[std::to_string(gpus)] = b;
  nlohmann::json j{{"id", id},           {"uid", uid},
                   {"gid", gid},         {"user", user},
                   {"account", account}, {"partition", partition},
                   {"gpu_type", gpu_type}, {"base_gpus", base_gpus},
                   {"spec", spec},       {"state", state},
                   {"init_token", init_token}, {"launcher", launcher},
                   {"paused", paused},   {"registered_at", registered_at},
                   {"last_rescale_at", last_rescale_at}, {"rescales", rescales},
                   {"batch", batch},     {"next_group", next_group},
                   {"grow_backoff_until", grow_backoff_until},
                   {"metrics_received", metrics_received},
                   {"samples_done", samples_done}, {"total_samples", total_samples},
                   {"metrics_at", metrics_at}, {"lr_factor", lr_factor},
                   {"grow_batch", grow_batch_json}, {"batch_command", batch_command},
                   {"batch_command_at", batch_command_at},
                   {"samples", samples_json}};
  if (efficiency) {
    j["efficiency"] = {efficiency->init_batch, efficiency->grad_sqr, efficiency->grad_var};
  }
  return j;
}

ElasticJob ElasticJob::FromJson(const nlohmann::json& j) {
  ElasticJob job;
  job.id = j.at("id");
  job.uid = j.at("uid");
  job.gid = j.value("gid", 0u);
  job.user = j.value("user", "");
  job.account = j.value("account", "");
  job.partition = j.value("partition", "");
  job.gpu_type = j.value("gpu_type", "");
  job.base_gpus = j.value("base_gpus", 0);
  job.spec = j.value("spec", nlohmann::json::object());
  job.state = j.value("state", "running");
  job.init_token = j.value("init_token", "");
  job.launcher = j.value("launcher", nlohmann::json());
  job.paused = j.value("paused", false);
  job.registered_at = j.value("registered_at", 0.0);
  job.last_rescale_at = j.value("last_rescale_at", 0.0);
  job.rescales = j.value("rescales", 0);
  job.batch = j.value("batch", int64_t{0});
  job.next_group = j.value("next_group", 1);
  job.grow_backoff_until = j.value("grow_backoff_until", 0.0);
  job.metrics_received = j.value("metrics_received", int64_t{0});
  job.samples_done = j.value("samples_done", int64_t{0});
  job.total_samples = j.value("total_samples", int64_t{0});
  job.metrics_at = j.value("metrics_at", 0.0);
  job.lr_factor = j.value("lr_factor", 1.0);
  job.grow_batch.clear();
  const nlohmann::json grow_batch = j.value("grow_batch", nlohmann::json::object());
  for (const auto& [gpus, b] : grow_batch.items()) job.grow_batch[std::stoi(gpus)] = b.get<int64_t>();
  job.batch_command = j.value("batch_command", int64_t{0});
  job.batch_command_at = j.value("batch_command_at", 0.0);
  for (const auto& s : j.value("samples", nlohmann::json::array())) {
    job.samples.push_back({s.at(0).get<int>(), s.at(1).get<int>(), s.at(2).get<double>(), s.at(3).get<double>()});
  }
  if (j.contains("efficiency")) {
    const auto& e = j["efficiency"];
    job.efficiency = optimizer::EfficiencyParams{e.at(0), e.at(1), e.at(2)};
  }
  return job;
}

int ElasticJob::SpecInt(const char* key, int fallback) const {
  auto it = spec.find(key);
  return it != spec.end() && it->is_number_integer() ? it->get<int>() : fallback;
}

bool Extension::Active() const {
  return state == "submitting" || state == "submitted" || state == "registered" || state == "ready" ||
         state == "joining" || state == "joined" || state == "leaving";
}

bool Extension::InFlight() const { return Active() && state != "joined"; }

// ---------------------------------------------------------------- setup
Controller::Controller(ControllerConfig config, std::unique_ptr<Database> db, std::unique_ptr<SlurmAdapter> slurm)
    : config_(std::move(config)),
      db_(std::move(db)),
      slurm_(std::move(slurm)),
      roles_(SlurmRoleSources(slurm_.get()), config_.admin_cache_s) {
  paused_all_ = config_.paused;
  LoadState();
}

void Controller::SetConfig(ControllerConfig config) {
  bool pause_changed = config.paused != config_.paused;
  config_ = std::move(config);
  roles_.SetCacheSeconds(config_.admin_cache_s);
  if (pause_changed) paused_all_ = config_.paused;
}

void Controller::LoadState() {
  db_->Run("SELECT job_id FROM jobs WHERE state = 'restart'", {},
           [&](sqlite3_stmt* st) { restarts_.insert(static_cast<uint32_t>(Database::Int(st, 0))); });
  db_->Run("SELECT data FROM jobs WHERE state = 'running'", {}, [&](sqlite3_stmt* st) {
    ElasticJob job = ElasticJob::FromJson(nlohmann::json::parse(Database::Text(st, 0)));
    jobs_[job.id] = std::move(job);
  });
  db_->Run(
      "SELECT id, parent, grp, COALESCE(slurm_job, 0), node, gpu_type, gpus, account, token, state, created_at, "
      "COALESCE(joined_at, 0) FROM extensions WHERE state NOT IN ('left', 'failed', 'cancelled')",
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
        e.state = Database::Text(st, 9);
        e.created_at = Database::Real(st, 10);
        e.joined_at = Database::Real(st, 11);
        extensions_[e.id] = e;
      });
  Log(LogLevel::kInfo, kComponent, "state loaded: ", jobs_.size(), " running elastic jobs, ", extensions_.size(),
      " extensions");
}

void Controller::SaveJob(const ElasticJob& job) {
  db_->Run(
      "INSERT INTO jobs (job_id, uid, user, account, state, registered_at, ended_at, data) VALUES (?,?,?,?,?,?,?,?) "
      "ON CONFLICT(job_id) DO UPDATE SET state = excluded.state, ended_at = excluded.ended_at, data = excluded.data",
      {int64_t{job.id}, int64_t{job.uid}, job.user, job.account, job.state, job.registered_at,
       job.state == "ended" ? SqlValue(Now()) : SqlValue(nullptr), job.ToJson().dump()});
}

void Controller::SaveExtension(Extension& e) {
  if (e.id == 0) {
    db_->Run(
        "INSERT INTO extensions (parent, grp, slurm_job, node, gpu_type, gpus, account, token, state, created_at) "
        "VALUES (?,?,?,?,?,?,?,?,?,?)",
        {int64_t{e.parent}, int64_t{e.group}, e.slurm_job ? SqlValue(int64_t{e.slurm_job}) : SqlValue(nullptr), e.node,
         e.gpu_type, int64_t{e.gpus}, e.account, e.token, e.state, e.created_at});
    e.id = db_->LastInsertId();
  } else {
    bool final_state = !e.Active();
    db_->Run(
        "UPDATE extensions SET slurm_job = ?, state = ?, joined_at = ?, ended_at = COALESCE(ended_at, ?) WHERE id = ?",
        {e.slurm_job ? SqlValue(int64_t{e.slurm_job}) : SqlValue(nullptr), e.state,
         e.joined_at > 0 ? SqlValue(e.joined_at) : SqlValue(nullptr), final_state ? SqlValue(Now()) : SqlValue(nullptr),
         e.id});
  }
  if (e.Active()) {
    extensions_[e.id] = e;
  } else {
    extensions_.erase(e.id);
  }
}

int64_t Controller::QueueCommand(uint32_t job, nlohmann::json body) {
  db_->Run("INSERT INTO commands (job_id, body, state, created_at) VALUES (?,?, 'queued', ?)",
           {int64_t{job}, body.dump(), Now()});
  return db_->LastInsertId();
}

void Controller::Audit(std::optional<uid_t> actor, const std::string& action, uint32_t job, const nlohmann::json& detail) {
  db_->Run("INSERT INTO audit (at, actor_uid, action, job_id, detail) VALUES (?,?,?,?,?)",
           {Now(), actor ? SqlValue(int64_t{*actor}) : SqlValue(nullptr), action,
            job ? SqlValue(int64_t{job}) : SqlValue(nullptr), detail.dump()});
  Log(LogLevel::kVerbose, kComponent, "audit: ", action, " job ", job, " ", detail.dump());
}

void Controller::SetGpus(ElasticJob& job, int gpus) {
  double now = Now();
  db_->Transaction([&] {
    db_->Run("UPDATE intervals SET end = ? WHERE job_id = ? AND end IS NULL", {now, int64_t{job.id}});
    if (gpus > 0) {
      db_->Run("INSERT INTO intervals (job_id, start, end, gpus, gpu_type) VALUES (?,?,NULL,?,?)",
               {int64_t{job.id}, now, int64_t{gpus}, job.gpu_type});
    }
  });
}

int Controller::CurrentGpus(const ElasticJob& job) const {
  int n = job.base_gpus;
  for (const auto& [id, e] : extensions_) {
    if (e.parent == job.id && (e.state == "joined" || e.state == "leaving")) n += e.gpus;
  }
  return n;
}

int Controller::PlannedGpus(const ElasticJob& job) const {
  int n = job.base_gpus;
  for (const auto& [id, e] : extensions_) {
    if (e.parent == job.id && e.Active() && e.state != "leaving") n += e.gpus;
  }
  return n;
}

Extension* Controller::FindExtension(uint32_t parent, int group) {
  for (auto& [id, e] : extensions_) {
    if (e.parent == parent && e.group == group) return &e;
  }
  return nullptr;
}

Extension* Controller::FindExtensionBySlurmJob(uint32_t slurm_job) {
  for (auto& [id, e] : extensions_) {
    if (e.slurm_job == slurm_job) return &e;
  }
  return nullptr;
}

ElasticJob& Controller::FindJob(const nlohmann::json& msg) {
  uint32_t id = JobField(msg);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) throw Refuse(ErrorKind::kNotFound, "job " + std::to_string(id) + " is not a running elastic job");
  return it->second;
}

ElasticJob& Controller::OwnedJob(uid_t uid, const nlohmann::json& msg) {
  ElasticJob& job = FindJob(msg);
  if (uid != job.uid && !roles_.IsRootOrSlurmUser(uid)) {
    throw Refuse(ErrorKind::kPermission, "uid " + std::to_string(uid) + " does not own job " + std::to_string(job.id));
  }
  return job;
}

// ---------------------------------------------------------------- messages
nlohmann::json Controller::Handle(uid_t uid, const nlohmann::json& msg) {
  int64_t id = msg.contains("id") && msg["id"].is_number_integer() ? msg["id"].get<int64_t>() : 0;
  try {
    return Dispatch(uid, msg);
  } catch (const Error& e) {
    Log(e.kind() == ErrorKind::kInternal ? LogLevel::kError : LogLevel::kVerbose, kComponent, "refused ",
        msg.value("type", "?"), " from uid ", uid, ": ", e.what());
    return wire::MakeErrorReply(id, Status(e.kind(), e.what()));
  } catch (const std::exception& e) {
    Log(LogLevel::kError, kComponent, "error handling ", msg.value("type", "?"), ": ", e.what());
    return wire::MakeErrorReply(id, Status(ErrorKind::kInternal, e.what()));
  }
}

nlohmann::json Controller::Dispatch(uid_t uid, const nlohmann::json& msg) {
  const std::string type = msg.value("type", "");
  using Handler = Json (Controller::*)(uid_t, const Json&);
  static const std::map<std::string, Handler> table{
      {"register", &Controller::OnRegister},   {"register_extension", &Controller::OnRegisterExtension},
      {"launcher", &Controller::OnLauncher},   {"metrics", &Controller::OnMetrics},
      {"poll", &Controller::OnPoll},           {"ack", &Controller::OnAck},
      {"ready", &Controller::OnReady},         {"left", &Controller::OnLeft},
      {"ended", &Controller::OnEnded},         {"status", &Controller::OnStatus},
      {"plan", &Controller::OnPlan},           {"set_policy", &Controller::OnSetPolicy},
      {"snapshot", &Controller::OnSnapshot},
  };
  int64_t id = msg.value("id", int64_t{0});
  if (type == "pause" || type == "resume") return wire::MakeReply(id, OnPause(uid, msg, type == "pause"));
  if (type == "pause_all" || type == "resume_all") return wire::MakeReply(id, OnPauseAll(uid, type == "pause_all"));
  auto it = table.find(type);
  if (it == table.end()) throw Refuse(ErrorKind::kProtocol, "unknown message type '" + type + "'");
  return wire::MakeReply(id, (this->*(it->second))(uid, msg));
}

nlohmann::json Controller::OnRegister(uid_t uid, const Json& msg) {
  if (uid != 0) throw Refuse(ErrorKind::kPermission, "only the plugin (root) registers jobs");
  uint32_t id = JobField(msg);
  auto info = slurm_->LoadJob(id);
  if (!info.ok()) throw Refuse(info.status().kind(), info.status().message());
  const JobInfo& j = info.value();
  if (j.state != SlurmJobState::kRunning) throw Refuse(ErrorKind::kInvalidArgument, "job " + std::to_string(id) + " is not running");
  if (Field<uint32_t>(msg, "user", j.user_id) != j.user_id) {
    throw Refuse(ErrorKind::kPermission, "job " + std::to_string(id) + " does not belong to that user");
  }
  ElasticJob job;
  auto old = jobs_.find(id);
  if (old != jobs_.end()) job = old->second;  // a restarted batch step registers again
  // A requeued job registers afresh: its group ids continue after those it used before.
  db_->Run("SELECT COALESCE(MAX(grp), 0) FROM extensions WHERE parent = ?", {int64_t{id}}, [&](sqlite3_stmt* st) {
    job.next_group = std::max(job.next_group, static_cast<int>(Database::Int(st, 0)) + 1);
  });
  restarts_.erase(id);
  job.id = id;
  job.uid = j.user_id;
  job.gid = j.group_id;
  job.user = j.user;
  job.account = j.account;
  job.partition = j.partition;
  job.gpu_type = j.gpu_type;
  job.base_gpus = j.gpus;
  job.spec = msg.value("spec", Json::object());
  job.state = "running";
  job.init_token = NewToken();
  if (job.registered_at == 0) job.registered_at = Now();
  jobs_[id] = job;
  SaveJob(job);
  SetGpus(jobs_[id], CurrentGpus(job));
  Audit(uid, "register", id, {{"gpus", job.base_gpus}, {"spec", job.spec}, {"user", job.user}});
  Log(LogLevel::kInfo, kComponent, "registered elastic job ", id, " of ", job.user, " at ", job.base_gpus, " ",
      job.gpu_type, " GPUs");
  return {{"mode", "elastic"}, {"join_token", job.init_token}, {"epoch_s", config_.epoch_s}};
}

nlohmann::json Controller::OnRegisterExtension(uid_t uid, const Json& msg) {
  if (uid != 0) throw Refuse(ErrorKind::kPermission, "only the plugin (root) registers extension jobs");
  uint32_t ext_job = JobField(msg);
  Extension* e = FindExtensionBySlurmJob(ext_job);
  if (e == nullptr) throw Refuse(ErrorKind::kNotFound, "job " + std::to_string(ext_job) + " is not an extension elasticd submitted");
  auto parent = jobs_.find(e->parent);
  if (parent == jobs_.end()) throw Refuse(ErrorKind::kNotFound, "the parent of extension job " + std::to_string(ext_job) + " is not running");
  auto info = slurm_->LoadJob(ext_job);
  if (!info.ok()) throw Refuse(info.status().kind(), info.status().message());
  std::string expected = "elastic-ext parent=" + std::to_string(e->parent) + " group=" + std::to_string(e->group);
  if (info.value().admin_comment != expected || info.value().user_id != parent->second.uid) {
    throw Refuse(ErrorKind::kPermission, "job " + std::to_string(ext_job) + " does not match elasticd's record of it");
  }
  const Json& launcher = parent->second.launcher;
  if (!launcher.is_object() || !launcher.contains("rendezvous_uri")) {
    throw Refuse(ErrorKind::kUnavailable, "the parent's launcher has not reported its rendezvous yet");
  }
  if (e->state == "submitted" || e->state == "submitting") {
    e->state = "registered";
    SaveExtension(*e);
  }
  return {{"parent", e->parent},
          {"group", e->group},
          {"join_token", e->token},
          {"rendezvous_uri", launcher["rendezvous_uri"]},
          {"spec", parent->second.spec}};
}

nlohmann::json Controller::OnLauncher(uid_t uid, const Json& msg) {
  ElasticJob& job = OwnedJob(uid, msg);
  Json launcher{{"rendezvous_uri", Field<std::string>(msg, "rendezvous_uri", "")},
                {"argv", msg.value("argv", Json::array())},
                {"launcher_args", msg.value("launcher_args", Json::array())},
                {"cwd", Field<std::string>(msg, "cwd", "")},
                {"env", msg.value("env", Json::object())},
                {"topology", msg.value("topology", Json::object())}};
  if (!launcher["argv"].is_array() || launcher["argv"].empty()) throw Refuse(ErrorKind::kProtocol, "launcher needs a non-empty \"argv\"");
  for (const auto& a : launcher["argv"]) {
    if (!a.is_string()) throw Refuse(ErrorKind::kProtocol, "\"argv\" must hold strings");
  }
  static const std::set<std::string> kAllowedArgs{"--oversubscribe", "--export"};
  bool expect_value = false;
  for (const auto& a : launcher["launcher_args"]) {
    if (!a.is_string()) throw Refuse(ErrorKind::kProtocol, "\"launcher_args\" must hold strings");
    if (expect_value) {
      expect_value = false;
      continue;
    }
    if (!kAllowedArgs.count(a.get<std::string>())) {
      throw Refuse(ErrorKind::kProtocol, "launcher argument '" + a.get<std::string>() + "' is not one elasticd passes on");
    }
    expect_value = a == "--export";
  }
  if (!launcher["env"].is_object()) throw Refuse(ErrorKind::kProtocol, "\"env\" must be an object");
  for (const auto& [k, v] : launcher["env"].items()) {
    if (!v.is_string() || k.empty() || k.find('=') != std::string::npos) throw Refuse(ErrorKind::kProtocol, "bad \"env\" entry");
  }
  if (launcher["cwd"].get<std::string>().empty() || launcher["cwd"].get<std::string>().front() != '/') {
    throw Refuse(ErrorKind::kProtocol, "launcher needs an absolute \"cwd\"");
  }
  job.launcher = launcher;
  SaveJob(job);
  return Json::object();
}

nlohmann::json Controller::OnMetrics(uid_t uid, const Json& msg) {
  ElasticJob& job = OwnedJob(uid, msg);
  int gpus = Field<int>(msg, "gpus", 0);
  double step_time = Field<double>(msg, "step_time_s", 0.0);
  double local_batch = Field<double>(msg, "local_batch", 0.0);
  int64_t global_batch = Field<int64_t>(msg, "global_batch", 0);
  if (global_batch > 0) job.batch = global_batch;
  if (gpus > 0 && step_time > 0 && local_batch > 0 && Field<int>(msg, "accum_steps", 0) == 0) {
    int nodes = 1;  // the groups of a job: base nodes plus one node per joined extension
    std::set<std::string> hosts;
    for (const auto& [id, e] : extensions_) {
      if (e.parent == job.id && e.state == "joined") hosts.insert(e.node);
    }
    nodes += static_cast<int>(hosts.size());
    job.samples.push_back({nodes, gpus, local_batch, step_time});
    if (job.samples.size() > kMaxSamples) job.samples.erase(job.samples.begin());
  }
  // Sample counts as numbers within [0, 1e18] (any JSON number; larger ones are refused).
  auto count = [&](const char* key) -> int64_t {
    const double v = Field<double>(msg, key, 0.0);
    if (!(v >= 0.0 && v <= 1e18)) throw Refuse(ErrorKind::kProtocol, std::string("field \"") + key + "\" out of range");
    return static_cast<int64_t>(v);
  };
  if (int64_t done = count("samples"); done > 0) job.samples_done = done;
  if (int64_t total = count("total_samples"); total > 0) job.total_samples = total;
  // grad_sqr = |g|^2 and grad_var = tr(Sigma) per sample, expressed at B0 = the job's minimum
  // batch (its current one without bounds); kept until the runtime measures them again.
  const double b0 = static_cast<double>(job.SpecInt("batch_min", static_cast<int>(std::max<int64_t>(global_batch, 1))));
  if (auto eff = EfficiencyFromMetrics(Field<double>(msg, "grad_sqr", 0.0), Field<double>(msg, "grad_var", 0.0), b0)) {
    job.efficiency = eff;
  }
  if (double lr = Field<double>(msg, "lr_factor", 0.0); std::isfinite(lr) && lr > 0) job.lr_factor = lr;
  job.metrics_at = Now();
  ++job.metrics_received;
  SaveJob(job);
  return Json::object();
}

nlohmann::json Controller::OnPoll(uid_t uid, const Json& msg) {
  ElasticJob& job = OwnedJob(uid, msg);
  Json commands = Json::array();
  std::vector<int64_t> ids;
  db_->Run("SELECT id, body FROM commands WHERE job_id = ? AND state IN ('queued', 'delivered') ORDER BY id",
           {int64_t{job.id}}, [&](sqlite3_stmt* st) {
             Json body = Json::parse(Database::Text(st, 1));
             body["command"] = Database::Int(st, 0);
             commands.push_back(body);
             ids.push_back(Database::Int(st, 0));
           });
  for (int64_t id : ids) db_->Run("UPDATE commands SET state = 'delivered' WHERE id = ? AND state = 'queued'", {id});
  return {{"commands", commands}, {"paused", job.paused || paused_all_}};
}

nlohmann::json Controller::OnAck(uid_t uid, const Json& msg) {
  ElasticJob& job = OwnedJob(uid, msg);
  int64_t cmd = Field<int64_t>(msg, "command", 0);
  Json body;
  std::string state;
  db_->Run("SELECT body, state FROM commands WHERE id = ? AND job_id = ?", {cmd, int64_t{job.id}},
           [&](sqlite3_stmt* st) {
             body = Json::parse(Database::Text(st, 0));
             state = Database::Text(st, 1);
           });
  if (body.is_null()) throw Refuse(ErrorKind::kNotFound, "job " + std::to_string(job.id) + " has no command " + std::to_string(cmd));
  if (state == "acked" || state == "failed") return {{"duplicate", true}};  // acks are idempotent
  bool ok = Field<bool>(msg, "ok", false);
  Json phases = msg.value("phases", Json::object());
  double now = Now();
  db_->Run("UPDATE commands SET state = ?, done_at = ?, result = ? WHERE id = ?",
           {std::string(ok ? "acked" : "failed"), now, msg.dump(), cmd});
  std::string action = body.value("action", "");
  int group = body.value("group", 0);
  Extension* e = FindExtension(job.id, group);
  double pause = phases.is_object() && phases.contains("pause_s") && phases["pause_s"].is_number()
                     ? phases["pause_s"].get<double>()
                     : 0.0;
  db_->Run("UPDATE rescales SET done_at = ?, ok = ?, pause_s = ?, phases = ? WHERE job_id = ? AND grp = ? AND kind = ? "
           "AND done_at IS NULL",
           {now, int64_t{ok ? 1 : 0}, pause, phases.dump(), int64_t{job.id}, int64_t{group}, action});
  if (action == "grow" && e != nullptr) {
    if (ok) {
      e->state = "joined";
      e->joined_at = now;
      SaveExtension(*e);
      job.rescales++;
      job.last_rescale_at = now;
      SetGpus(job, CurrentGpus(job));
      Audit(uid, "grown", job.id, {{"group", group}, {"gpus", CurrentGpus(job)}, {"phases", phases}});
    } else {
      EndExtension(*e, "failed", "grow failed: " + Field<std::string>(msg, "error", "no reason given"), true);
    }
  } else if (action == "shrink" && e != nullptr) {
    if (ok) {
      job.rescales++;
      job.last_rescale_at = now;
      EndExtension(*e, "left", "shrink", true);
      Audit(uid, "shrunk", job.id, {{"group", group}, {"gpus", CurrentGpus(job)}, {"phases", phases}});
    } else {
      Log(LogLevel::kWarning, kComponent, "job ", job.id, " could not shrink group ", group, ": ",
          Field<std::string>(msg, "error", "no reason"));
      e->state = "joined";
      SaveExtension(*e);
    }
  }
  if (action == "set_batch") {
    if (job.batch_command == cmd) job.batch_command = 0;
    if (ok) {
      job.last_rescale_at = now;  // a batch change counts for min_rescale_interval too
      Audit(uid, "batch_set", job.id, {{"from", job.batch}, {"to", msg.value("global_batch", Json())}});
    }
  }
  if (msg.contains("global_batch") && msg["global_batch"].is_number_integer()) job.batch = msg["global_batch"];
  if (double lr = Field<double>(msg, "lr_factor", 0.0); std::isfinite(lr) && lr > 0) job.lr_factor = lr;
  SaveJob(job);
  return Json::object();
}

nlohmann::json Controller::OnReady(uid_t uid, const Json& msg) {
  ElasticJob& job = OwnedJob(uid, msg);
  int group = Field<int>(msg, "group", 0);
  Extension* e = FindExtension(job.id, group);
  if (e == nullptr) throw Refuse(ErrorKind::kNotFound, "job " + std::to_string(job.id) + " has no pending group " + std::to_string(group));
  if (e->state == "joining" || e->state == "joined") return {{"duplicate", true}};
  if (e->state != "registered" && e->state != "submitted") {
    throw Refuse(ErrorKind::kInvalidArgument, "group " + std::to_string(group) + " is " + e->state + ", not waiting to join");
  }
  int from = CurrentGpus(job);
  e->state = "joining";
  SaveExtension(*e);
  // The batch the plan chose for the size this group brings the job to (the current one when it
  // chose none): a growth in several groups passes through each size at that size's batch.
  auto planned_batch = job.grow_batch.find(from + e->gpus);
  QueueCommand(job.id, {{"action", "grow"}, {"group", group}, {"join_token", e->token}, {"gpus", from + e->gpus},
                        {"global_batch", planned_batch != job.grow_batch.end() ? planned_batch->second : job.batch}});
  db_->Run("INSERT INTO rescales (job_id, kind, grp, from_gpus, to_gpus, requested_at) VALUES (?, 'grow', ?, ?, ?, ?)",
           {int64_t{job.id}, int64_t{group}, int64_t{from}, int64_t{from + e->gpus}, Now()});
  Audit(uid, "grow", job.id, {{"group", group}, {"from", from}, {"to", from + e->gpus}, {"node", e->node}});
  return Json::object();
}

nlohmann::json Controller::OnLeft(uid_t uid, const Json& msg) {
  ElasticJob& job = OwnedJob(uid, msg);
  int group = Field<int>(msg, "group", 0);
  Extension* e = FindExtension(job.id, group);
  if (e == nullptr) return {{"duplicate", true}};
  EndExtension(*e, "left", Field<std::string>(msg, "reason", "left"), true);
  job.last_rescale_at = Now();
  SaveJob(job);
  return Json::object();
}

nlohmann::json Controller::OnEnded(uid_t uid, const Json& msg) {
  ElasticJob& job = OwnedJob(uid, msg);
  EndJob(job, "ended (exit code " + std::to_string(Field<int>(msg, "exit_code", 0)) + ")");
  return Json::object();
}

nlohmann::json Controller::OnStatus(uid_t, const Json&) {
  Json jobs = Json::array();
  for (const auto& [id, job] : jobs_) {
    Json exts = Json::array();
    for (const auto& [eid, e] : extensions_) {
      if (e.parent != id) continue;
      exts.push_back({{"job_id", e.slurm_job}, {"group", e.group}, {"node", e.node}, {"gpus", e.gpus}, {"state", e.state}});
    }
    jobs.push_back({{"job_id", id},
                    {"user", job.user},
                    {"account", job.account},
                    {"gpu_type", job.gpu_type},
                    {"base_gpus", job.base_gpus},
                    {"gpus", CurrentGpus(job)},
                    {"planned_gpus", PlannedGpus(job)},
                    {"max_gpus", job.SpecInt("gpus_max", job.base_gpus)},
                    {"batch", job.batch},
                    {"batch_elastic", BatchElastic(job)},
                    {"lr_scaling", job.spec.value("lr_scaling", Json("none"))},
                    {"lr_factor", job.lr_factor},
                    {"noise_scale", job.efficiency ? Json(NoiseScaleJson(*job.efficiency)) : Json()},
                    {"rescales", job.rescales},
                    {"paused", job.paused},
                    {"launcher_ready", job.launcher.is_object()},
                    {"metrics_received", job.metrics_received},
                    {"samples_done", job.samples_done},
                    {"total_samples", job.total_samples},
                    {"extensions", exts}});
  }
  return {{"jobs", jobs}, {"paused", paused_all_}, {"policy", config_.policy}, {"epoch", epochs_},
          {"epoch_s", config_.epoch_s}};
}

nlohmann::json Controller::OnPlan(uid_t uid, const Json&) {
  roles_.Require(uid, Role::kOperator, "plan");
  EpochResult r = RunEpoch(/*dry_run=*/true);
  return {{"plan", r.plan}, {"duration_ms", r.duration_ms}};
}

nlohmann::json Controller::OnSnapshot(uid_t uid, const Json&) {
  roles_.Require(uid, Role::kOperator, "snapshot");
  auto nodes = slurm_->LoadNodes();
  if (!nodes.ok()) throw Refuse(nodes.status().kind(), nodes.status().message());
  auto jobs = slurm_->LoadJobs();
  if (!jobs.ok()) throw Refuse(jobs.status().kind(), jobs.status().message());
  return {{"snapshot", SnapshotToJson(nodes.value(), jobs.value(), RegistryJson())}};
}

nlohmann::json Controller::RegistryJson() const {
  Json elastic = Json::array();
  for (const auto& [id, job] : jobs_) elastic.push_back(job.ToJson());
  return elastic;
}

nlohmann::json Controller::OnPause(uid_t uid, const Json& msg, bool pause) {
  ElasticJob& job = FindJob(msg);
  Json detail = Json::object();
  if (uid != job.uid) {  // the owner may; for another user's job, the same role as pause_all
    RoleCheck as = roles_.Require(uid, Role::kOperator,
                                  "uid " + std::to_string(uid) + " does not own job " + std::to_string(job.id) +
                                      ": " + (pause ? "pausing" : "resuming") + " another user's job");
    detail["as"] = as.basis;
  }
  job.paused = pause;
  SaveJob(job);
  Audit(uid, pause ? "pause" : "resume", job.id, detail);
  return Json::object();
}

nlohmann::json Controller::OnPauseAll(uid_t uid, bool pause) {
  RoleCheck as = roles_.Require(uid, Role::kOperator, pause ? "pause_all" : "resume_all");
  paused_all_ = pause;
  Audit(uid, pause ? "pause_all" : "resume_all", 0, {{"as", as.basis}});
  return Json::object();
}

nlohmann::json Controller::OnSetPolicy(uid_t uid, const Json& msg) {
  RoleCheck as = roles_.Require(uid, Role::kOperator, "set_policy");
  std::string name = Field<std::string>(msg, "policy", "");
  auto policy = optimizer::MakePolicy(name);
  if (!policy.ok()) throw Refuse(ErrorKind::kInvalidArgument, policy.status().message());
  config_.policy = name;
  Audit(uid, "set_policy", 0, {{"policy", name}, {"as", as.basis}});
  return Json::object();
}

// ---------------------------------------------------------------- life cycle
void Controller::EndExtension(Extension& e, const std::string& state, const std::string& reason, bool cancel) {
  uint32_t parent = e.parent;
  bool was_joined = e.state == "joined" || e.state == "leaving";
  if (cancel && e.slurm_job != 0) {
    Status s = slurm_->Cancel(e.slurm_job);
    if (!s.ok()) Log(LogLevel::kWarning, kComponent, "cannot cancel extension job ", e.slurm_job, ": ", s.message());
  }
  db_->Run("UPDATE extensions SET reason = ? WHERE id = ?", {reason, e.id});
  Audit(std::nullopt, "extension_" + state, parent, {{"group", e.group}, {"job", e.slurm_job}, {"reason", reason}});
  Extension copy = e;
  copy.state = state;
  SaveExtension(copy);  // erases it from extensions_: `e` is gone after this
  auto it = jobs_.find(parent);
  if (was_joined && it != jobs_.end() && it->second.state == "running") SetGpus(it->second, CurrentGpus(it->second));
  if (state == "failed" && it != jobs_.end()) {
    // Do not retry at once: a failing extension would otherwise be resubmitted every epoch.
    it->second.grow_backoff_until = Now() + std::max(config_.min_rescale_interval_s, 5 * config_.epoch_s);
    SaveJob(it->second);
  }
}

void Controller::EndJob(ElasticJob& job, const std::string& why) {
  std::vector<int64_t> ids;
  for (const auto& [id, e] : extensions_) {
    if (e.parent == job.id) ids.push_back(id);
  }
  for (int64_t id : ids) {
    auto it = extensions_.find(id);
    if (it != extensions_.end()) EndExtension(it->second, "cancelled", "parent " + why, true);
  }
  db_->Run("UPDATE commands SET state = 'cancelled' WHERE job_id = ? AND state IN ('queued', 'delivered')",
           {int64_t{job.id}});
  job.state = "ended";
  SetGpus(job, 0);
  SaveJob(job);
  Audit(std::nullopt, "ended", job.id, {{"why", why}});
  Log(LogLevel::kInfo, kComponent, "elastic job ", job.id, " ", why);
  jobs_.erase(job.id);
}

void Controller::FinishRestart(uint32_t job, const std::string& action, const Json& detail) {
  restarts_.erase(job);
  db_->Run("UPDATE jobs SET state = 'ended' WHERE job_id = ? AND state = 'restart'", {int64_t{job}});
  Audit(std::nullopt, action, job, detail);
}

void Controller::RestartLostWorlds(const std::map<uint32_t, const JobInfo*>& by_id) {
  for (uint32_t id : std::vector<uint32_t>(restarts_.begin(), restarts_.end())) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      Log(LogLevel::kWarning, kComponent, "job ", id, " not restarted: slurmctld no longer knows it");
      FinishRestart(id, "restart_failed", {{"why", "unknown to slurmctld"}});
      continue;
    }
    const JobInfo& j = *it->second;
    if (j.state != SlurmJobState::kEnded) {  // requeued already (by elasticd before a crash, or by hand)
      FinishRestart(id, "restarted", {{"by", "slurm"}, {"restarts", j.restarts}});
      continue;
    }
    if (j.completing) continue;  // Slurm still ends its processes: next epoch
    if (j.restarts >= config_.max_restarts) {
      Log(LogLevel::kError, kComponent, "job ", id, " lost a rank again and is left failed: restarted ", j.restarts,
          " times already (recovery.max_restarts = ", config_.max_restarts, ")");
      FinishRestart(id, "restart_refused", {{"restarts", j.restarts}});
      continue;
    }
    Status s = slurm_->Requeue(id);
    if (s.kind() == ErrorKind::kUnavailable) continue;  // completing after all: next epoch
    if (!s.ok()) {
      Log(LogLevel::kError, kComponent, "job ", id, " not restarted: ", s.message());
      FinishRestart(id, "restart_failed", {{"why", s.message()}});
      continue;
    }
    Log(LogLevel::kInfo, kComponent, "requeued job ", id, " (a rank of its world died; restart ", j.restarts + 1,
        " of at most ", config_.max_restarts, "): it resumes from its last checkpoint");
    FinishRestart(id, "restarted", {{"by", "elasticd"}, {"restarts", j.restarts + 1}});
  }
}

Status Controller::SubmitExtension(ElasticJob& job, const std::string& node, int gpus) {
  if (!job.launcher.is_object()) return Status(ErrorKind::kUnavailable, "the job's launcher has not registered");
  Extension e;
  e.parent = job.id;
  e.group = job.next_group++;
  e.node = node;
  e.gpu_type = job.gpu_type;
  e.gpus = gpus;
  e.account = job.account;
  e.token = NewToken();
  e.state = "submitting";
  e.created_at = Now();
  SaveJob(job);       // next_group first: a group id is never used twice
  SaveExtension(e);   // the intent, before Slurm knows anything

  auto parent = slurm_->LoadJob(job.id);
  if (!parent.ok() || parent.value().state != SlurmJobState::kRunning) {
    EndExtension(e, "failed", "parent not running", false);
    return Status(ErrorKind::kUnavailable, "the parent is not running");
  }
  int64_t limit_min = config_.extension_max_time_min;
  if (parent.value().time_limit_s > 0 && parent.value().end_time > 0) {
    int64_t remaining = (parent.value().end_time - static_cast<int64_t>(Now())) / 60;
    limit_min = std::min(limit_min, remaining);
  }
  if (limit_min < std::max<int64_t>(1, static_cast<int64_t>(2 * config_.epoch_s / 60))) {
    EndExtension(e, "failed", "parent ends too soon", false);
    return Status(ErrorKind::kUnavailable, "the parent ends too soon for an extension");
  }

  ExtensionSubmission sub;
  sub.name = "elastic-ext:" + std::to_string(job.id) + ":" + std::to_string(e.group);
  sub.user_id = job.uid;
  sub.group_id = job.gid;
  sub.account = job.account;
  sub.partition = config_.extension_partition.empty() ? job.partition : config_.extension_partition;
  sub.qos = config_.extension_qos;
  sub.node = node;
  sub.gpu_type = job.gpu_type;
  sub.gpus = gpus;
  sub.time_limit_min = limit_min;
  sub.work_dir = job.launcher.value("cwd", "/tmp");
  std::string script = "#!/bin/sh\n# Extension of elastic job " + std::to_string(job.id) + ", group " +
                       std::to_string(e.group) + ", submitted by elasticd.\nexec " + ShellQuote(config_.launcher) +
                       " --join";
  for (const auto& a : job.launcher.value("launcher_args", Json::array())) script += " " + ShellQuote(a.get<std::string>());
  script += " --";
  for (const auto& a : job.launcher["argv"]) script += " " + ShellQuote(a.get<std::string>());
  sub.script = script + "\n";
  for (const auto& [k, v] : job.launcher["env"].items()) sub.environment.push_back(k + "=" + v.get<std::string>());
  sub.environment.push_back("_SLURM_SPANK_OPTION_elastic_elastic_extension=" + std::to_string(job.id) + ":" +
                            std::to_string(e.group));
  if (passwd* pw = getpwuid(job.uid)) sub.environment.push_back(std::string("HOME=") + pw->pw_dir);

  auto submitted = slurm_->SubmitHeld(sub);
  if (!submitted.ok()) {
    EndExtension(e, "failed", submitted.status().message(), false);
    return submitted.status();
  }
  e.slurm_job = submitted.value();
  SaveExtension(e);
  std::string link = "elastic-ext parent=" + std::to_string(job.id) + " group=" + std::to_string(e.group);
  Status s = slurm_->SetAdminComment(e.slurm_job, link);
  if (s.ok()) s = slurm_->Release(e.slurm_job);
  if (!s.ok()) {
    EndExtension(e, "failed", s.message(), true);
    return s;
  }
  e.state = "submitted";
  SaveExtension(e);
  Audit(std::nullopt, "extend", job.id, {{"group", e.group}, {"job", e.slurm_job}, {"node", node}, {"gpus", gpus}});
  Log(LogLevel::kInfo, kComponent, "job ", job.id, ": extension ", e.slurm_job, " (group ", e.group, ", ", gpus,
      " GPUs on ", node, ")");
  return Status::Ok();
}

void Controller::QueueBatchChange(ElasticJob& job, int64_t batch, int gpus, const Json& decision) {
  job.batch_command = QueueCommand(job.id, {{"action", "set_batch"}, {"global_batch", batch}});
  job.batch_command_at = Now();
  SaveJob(job);
  Audit(std::nullopt, "set_batch", job.id, {{"from", job.batch}, {"to", batch}, {"gpus", gpus}, {"gain", decision["gain"]}});
}

// ---------------------------------------------------------------- epoch
EpochResult Controller::RunEpoch(bool dry_run) {
  auto t0 = std::chrono::steady_clock::now();
  auto nodes_r = slurm_->LoadNodes();
  auto jobs_r = slurm_->LoadJobs();
  if (!nodes_r.ok() || !jobs_r.ok()) {
    Log(LogLevel::kWarning, kComponent, "epoch skipped: ", (!nodes_r.ok() ? nodes_r.status() : jobs_r.status()).message());
    EpochResult skipped;
    skipped.plan = {{"skipped", true}};
    return skipped;
  }
  double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EpochResult result = Epoch(nodes_r.value(), jobs_r.value(), dry_run, load_ms);
  return result;
}

EpochResult Controller::Epoch(const std::vector<NodeInfo>& nodes, const std::vector<JobInfo>& sjobs, bool dry_run,
                               double slurm_ms) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
  EpochResult result;
  double now = Now();
  std::map<uint32_t, const JobInfo*> by_id;
  for (const auto& j : sjobs) by_id[j.id] = &j;

  // 1. Bring the registry in line with Slurm.
  if (!dry_run) {
    std::vector<uint32_t> gone;
    for (auto& [id, job] : jobs_) {
      auto it = by_id.find(id);
      if (it == by_id.end() || it->second->state != SlurmJobState::kRunning) gone.push_back(id);
    }
    for (uint32_t id : gone) {
      auto it = by_id.find(id);
      const JobInfo* info = it == by_id.end() ? nullptr : it->second;
      if (info != nullptr && info->state == SlurmJobState::kEnded && info->exit_code == kExitWorldLost) {
        EndJob(jobs_.at(id), "ended with exit code 75: a rank of its world died");
        if (config_.restart_world_lost) {
          db_->Run("UPDATE jobs SET state = 'restart' WHERE job_id = ?", {int64_t{id}});
          restarts_.insert(id);
        }
        continue;
      }
      EndJob(jobs_.at(id), "is no longer running in Slurm");
    }
    RestartLostWorlds(by_id);
    std::vector<int64_t> ext_ids;
    for (const auto& [id, e] : extensions_) ext_ids.push_back(id);
    for (int64_t id : ext_ids) {
      auto eit = extensions_.find(id);
      if (eit == extensions_.end()) continue;
      Extension& e = eit->second;
      auto it = by_id.find(e.slurm_job);
      bool alive = e.slurm_job != 0 && it != by_id.end() &&
                   (it->second->state == SlurmJobState::kPending || it->second->state == SlurmJobState::kRunning);
      if (e.state != "submitting" && !alive) {
        EndExtension(e, e.state == "joined" || e.state == "leaving" ? "left" : "failed", "extension job ended", false);
        continue;
      }
      if (e.state != "joined" && e.state != "leaving" && now - e.created_at > config_.ready_timeout_s) {
        if (e.state == "joining") {
          db_->Run("UPDATE commands SET state = 'cancelled' WHERE job_id = ? AND state IN ('queued','delivered') AND "
                   "json_extract(body, '$.group') = ?",
                   {int64_t{e.parent}, int64_t{e.group}});
          QueueCommand(e.parent, {{"action", "cancel_grow"}, {"group", e.group}});
        }
        EndExtension(e, "failed", "did not join within " + std::to_string(static_cast<int>(config_.ready_timeout_s)) + " s", true);
      }
    }
  }

  // 2. Snapshot for the optimizer.
  auto t_snap = Clock::now();
  std::map<std::string, int> capacity;        // GPUs per type elastic work and pending jobs may use
  std::map<std::string, int> gpus_per_node;
  std::map<std::string, const NodeInfo*> node_by_name;
  for (const auto& n : nodes) {
    node_by_name[n.name] = &n;
    if (n.gpu_type.empty() || n.gpus == 0) continue;
    gpus_per_node[n.gpu_type] = std::max(gpus_per_node[n.gpu_type], n.gpus);
    if (n.usable) capacity[n.gpu_type] += n.gpus;
  }
  std::set<uint32_t> extension_jobs;
  for (const auto& [id, e] : extensions_) extension_jobs.insert(e.slurm_job);
  optimizer::Snapshot snap;
  std::vector<uint32_t> elastic_order;
  std::map<std::string, int> account_ext;  // extension GPUs per account
  std::set<uint32_t> frozen_jobs;          // elastic jobs that may not change this epoch
  std::map<uint32_t, double> finishing;    // jobs not grown because they are about to finish: time left
  std::set<uint32_t> no_step;               // jobs not grown because their program reported no step yet
  std::map<uint32_t, std::map<int, int64_t>> batch_at;  // each elastic job's batch per GPU count (its options)
  for (const auto& [id, e] : extensions_) account_ext[e.account] += e.gpus;
  // Rigid running jobs are fixed load; elastic jobs on unusable nodes keep what they hold.
  for (const auto& j : sjobs) {
    if (j.state != SlurmJobState::kRunning || j.gpus == 0 || extension_jobs.count(j.id) || jobs_.count(j.id)) continue;
    if (j.admin_comment.rfind("elastic-ext ", 0) == 0) continue;  // an extension (only admins set this)
    capacity[j.gpu_type] -= j.gpus;
  }
  for (const auto& [id, job] : jobs_) {
    optimizer::Job oj;
    oj.id = std::to_string(id);
    oj.owner = job.user;
    oj.account = job.account;
    oj.state = optimizer::JobState::kRunning;
    int planned = PlannedGpus(job);
    oj.min_gpus = job.base_gpus;
    oj.gpu_step = std::max(1, job.SpecInt("gpu_step", 1));
    oj.current = optimizer::Configuration{job.gpu_type, planned, job.batch};
    oj.age_s = now - job.registered_at;
    oj.rescales = job.rescales;
    bool in_flight = false;
    for (const auto& [eid, e] : extensions_) in_flight = in_flight || (e.parent == id && e.InFlight());
    // A set_batch not acknowledged (one the runtime ignored for ready_timeout no longer counts).
    bool batch_pending = job.batch_command != 0 && now - job.batch_command_at <= config_.ready_timeout_s;
    bool frozen = job.paused || paused_all_ || !job.launcher.is_object() || in_flight || batch_pending ||
                  now - job.last_rescale_at < config_.min_rescale_interval_s;
    if (frozen) frozen_jobs.insert(id);
    // A job grows once its program trains (it reported a step: its speed at the base size is
    // measured) and not when it is about to finish: an extension would join too late to pay off,
    // or be scheduled after its parent ended (docs/admin-guide.md, extensions.min_time_left).
    bool may_grow = now >= job.grow_backoff_until && job.metrics_received > 0;
    if (job.metrics_received == 0) no_step.insert(id);
    if (auto left = TimeLeftAtCurrentSize(job, now); left && *left < config_.MinTimeLeftS()) {
      may_grow = false;
      finishing[id] = *left;
    }
    int max_gpus = job.SpecInt("gpus_max", job.base_gpus);
    int64_t cap = config_.default_account_extension_gpus;
    if (auto it = config_.account_extension_gpus.find(job.account); it != config_.account_extension_gpus.end()) cap = it->second;
    if (cap >= 0) {
      int own_ext = planned - job.base_gpus;
      int others = account_ext[job.account] - own_ext;
      max_gpus = std::min<int>(max_gpus, job.base_gpus + static_cast<int>(std::max<int64_t>(0, cap - others)));
    }
    max_gpus = std::max(max_gpus, planned);
    int gpn = gpus_per_node.count(job.gpu_type) ? gpus_per_node[job.gpu_type] : 1;
    if (frozen) {
      oj.max_gpus = planned;
      oj.options = {{job.gpu_type, planned, job.batch, 1.0}};
      oj.min_gpus = planned;
    } else {
      oj.max_gpus = may_grow ? max_gpus : planned;
      // Option tables change only with the job's model or bounds: reuse them for a minute.
      // Inputs of the table: the bounds, the sizes measured (a second one makes the model), the
      // fit, the batch, and the noise scale in 5% steps (the best batches move with it).
      const double noise = job.efficiency ? NoiseScale(*job.efficiency) : 0.0;
      const int noise_key = std::isfinite(noise) && noise > 0 ? static_cast<int>(std::lround(20 * std::log(noise))) : -1;
      std::set<int> sizes;
      for (const auto& smp : job.samples) sizes.insert(smp.gpus);
      auto key = std::make_tuple(oj.max_gpus, gpn, job.fit_at, job.batch, noise_key, static_cast<int>(sizes.size()));
      if (job.options_cache && job.options_key == key && now - job.options_at < 60) {
        oj.options = *job.options_cache;
      } else {
        oj.options = JobOptions(job, oj.max_gpus, gpn, now);
        job.options_cache = oj.options;
        job.options_key = key;
        job.options_at = now;
      }
      // Time left at the base size, for the remaining-time objective: the samples still to train
      // at the speed of the last step-time sample, scaled from the current size to the base by
      // the model.
      if (job.total_samples > job.samples_done && !job.samples.empty()) {
        const optimizer::StepSample& last = job.samples.back();
        const double rate = last.gpus * last.local_batch / last.step_time;  // samples per second
        double u_now = 1.0;
        for (const auto& o : oj.options) {
          if (o.gpus == planned && o.utility > 0) u_now = o.utility;
        }
        const double left = static_cast<double>(job.total_samples - job.samples_done) / rate * u_now;
        oj.remaining_s = std::clamp(left, 1.0, optimizer::kMaxRemainingInputS);  // > 0: known
      }
      // The option at the current size is worth a bit more: hysteresis against flapping.
      for (auto& o : oj.options) {
        if (o.gpus == planned) o.utility *= 1.0 + config_.min_gain;
      }
      if (oj.options.empty()) oj.options = {{job.gpu_type, planned, job.batch, 1.0}};
    }
    for (const auto& o : oj.options) {
      if (o.batch > 0) batch_at[id][o.gpus] = o.batch;
    }
    oj.allowed_types = {job.gpu_type};
    snap.jobs.push_back(std::move(oj));
    elastic_order.push_back(id);
  }
  // Pending jobs (rigid or elastic) are demand at their requested size.
  for (const auto& j : sjobs) {
    if (j.state != SlurmJobState::kPending || !j.waits_for_resources || j.gpus == 0) continue;
    if (extension_jobs.count(j.id) || j.admin_comment.rfind("elastic-ext ", 0) == 0) continue;
    optimizer::Job oj;
    oj.id = "pending:" + std::to_string(j.id);
    oj.owner = j.user;
    oj.account = j.account;
    oj.state = optimizer::JobState::kPending;
    // Extensions use GPUs nobody waits for: a waiting job outweighs any extension's gain, so the
    // extensions in its way are released and Slurm can start it.
    oj.weight = config_.pending_weight;
    oj.min_gpus = oj.max_gpus = j.gpus;
    for (const auto& [type, cap] : capacity) {
      if (!j.gpu_type.empty() && j.gpu_type != type) continue;
      oj.options.push_back({type, j.gpus, 0, 1.0});
    }
    if (oj.options.empty()) continue;
    snap.jobs.push_back(std::move(oj));
  }
  for (const auto& [type, cap] : capacity) {
    if (cap > 0) snap.cluster.types.push_back({type, cap, 1});  // capacity in GPUs; nodes are chosen below
  }
  // Drop options on types without capacity (e.g. every node of a type drained).
  for (auto& j : snap.jobs) {
    std::erase_if(j.options, [&](const optimizer::Option& o) { return capacity[o.gpu_type] <= 0; });
  }
  std::erase_if(snap.jobs, [](const optimizer::Job& j) { return j.options.empty(); });
  result.stage_ms["snapshot"] = ms_since(t_snap);

  // 3. Plan.
  auto t_plan = Clock::now();
  optimizer::PolicyOptions popts;
  popts.keep_running = true;
  popts.place = false;
  popts.objective.rescale_cost_s = config_.rescale_cost_s;
  popts.objective.srpt_exponent = config_.srpt_exponent;
  popts.objective.rescale_payback = config_.rescale_payback;
  if (config_.objective == "power-mean") popts.objective.kind = optimizer::ObjectiveKind::kPowerMean;
  nlohmann::json decisions = nlohmann::json::array();
  std::map<std::string, const optimizer::Assignment*> assignment;
  optimizer::Plan plan;
  auto policy = optimizer::MakePolicy(config_.policy);
  bool planned = false;
  if (policy.ok() && !snap.jobs.empty() && !snap.cluster.types.empty()) {
    // Jobs whose options all lie on one GPU type do not compete with other types: when every
    // job is such, each type is its own (single-type, exactly solvable) problem.
    std::map<std::string, optimizer::Snapshot> per_type;
    bool separable = true;
    for (const auto& j : snap.jobs) {
      std::set<std::string> types;
      for (const auto& o : j.options) types.insert(o.gpu_type);
      if (types.size() != 1) {
        separable = false;
        break;
      }
      per_type[*types.begin()].jobs.push_back(j);
    }
    if (!separable || per_type.size() < 2) per_type = {{"", snap}};
    // The epoch's solve budget is shared by the sub-problems: past it, dp returns a plan with a
    // certified bound instead of an exact one (docs/optimizer.md).
    popts.time_budget_ms = config_.solve_budget_ms / static_cast<double>(per_type.size());
    plan.policy = config_.policy;
    planned = true;
    for (auto& [type, sub] : per_type) {
      if (!type.empty()) {
        for (const auto& t : snap.cluster.types) {
          if (t.name == type) sub.cluster.types = {t};
        }
      }
      auto solved = policy.value()->Solve(sub, popts);
      if (!solved.ok()) {
        Log(LogLevel::kWarning, kComponent, "the optimizer failed: ", solved.status().message());
        planned = false;
        break;
      }
      plan.objective += solved.value().objective;
      plan.bound += solved.value().bound;
      plan.solve_ms += solved.value().solve_ms;
      for (auto& a : solved.value().assignments) plan.assignments.push_back(std::move(a));
    }
    if (planned) {
      for (const auto& a : plan.assignments) assignment[a.job_id] = &a;
    }
  }
  result.stage_ms["plan"] = ms_since(t_plan);

  // 4. Diff and enact: node groups for growth, whole extension groups for shrinking.
  auto t_diff = Clock::now();
  // Free GPUs per usable node, and per GPU type the nodes ordered by most free GPUs first
  // (ties by name), kept in order as growth takes GPUs: choosing nodes costs O(log nodes).
  std::unordered_map<std::string, int> free_gpus;
  std::unordered_map<std::string, std::string> type_of;
  std::map<std::string, std::set<std::pair<int, std::string>>> by_free;  // (-free, name)
  for (const auto& n : nodes) {
    if (n.usable && !n.draining) {
      free_gpus[n.name] = n.free();
      type_of[n.name] = n.gpu_type;
    }
  }
  for (const auto& [id, e] : extensions_) {  // submitted but not yet running: their GPUs are spoken for
    auto it = by_id.find(e.slurm_job);
    if (it != by_id.end() && it->second->state == SlurmJobState::kPending && free_gpus.count(e.node)) {
      free_gpus[e.node] = std::max(0, free_gpus[e.node] - e.gpus);
    }
  }
  for (const auto& [name, free] : free_gpus) {
    if (free > 0) by_free[type_of[name]].insert({-free, name});
  }
  for (uint32_t id : elastic_order) {
    ElasticJob& job = jobs_.at(id);
    int current = PlannedGpus(job);
    auto ait = assignment.find(std::to_string(id));
    int target = planned && ait != assignment.end() && !ait->second->pending ? ait->second->gpus : current;
    // Extensions on nodes that start draining (or are down, failed, in maintenance) leave,
    // whatever the plan says. A node whose state slurmctld does not know right now (it stopped
    // responding, or slurmctld restarted and the node has not registered again) is no reason:
    // Slurm itself ends the extension if the node goes down.
    std::vector<int64_t> draining;
    for (const auto& [eid, e] : extensions_) {
      auto nit = node_by_name.find(e.node);
      if (e.parent == id && e.state == "joined" && nit != node_by_name.end() &&
          (nit->second->draining || (!nit->second->usable && !nit->second->unresponsive))) {
        draining.push_back(eid);
      }
    }
    // The global batch the plan chose for the target size (the current batch when it chose none).
    const int64_t target_batch =
        planned && ait != assignment.end() && !ait->second->pending && ait->second->batch > 0 ? ait->second->batch : job.batch;
    nlohmann::json d{{"job", id}, {"current", current}, {"target", target}, {"batch", job.batch}, {"target_batch", target_batch}};
    if (auto f = finishing.find(id); f != finishing.end()) d["time_left_s"] = f->second;  // not grown
    if (no_step.count(id)) d["no_step_yet"] = true;  // not grown: its program has reported no step
    // The batch of the job's options at n GPUs (its current batch where it has none).
    auto batch_for = [&](int n) {
      auto it = batch_at[id].find(n);
      return it != batch_at[id].end() ? it->second : job.batch;
    };
    if (target > current) {
      d["action"] = "grow";
      int need = target - current;
      int step = std::max(1, job.SpecInt("gpu_step", 1));
      auto& order = by_free[job.gpu_type];
      nlohmann::json groups = nlohmann::json::array();
      std::vector<std::pair<int, std::string>> skipped;  // nodes with fewer free GPUs than a step
      while (need > 0 && !order.empty()) {
        auto [neg_free, node] = *order.begin();
        order.erase(order.begin());
        int free = -neg_free;
        int take = std::min(free, need) / step * step;
        if (take <= 0) {
          skipped.push_back({neg_free, node});
          if (free < step) break;  // every later node has even fewer free GPUs
          continue;
        }
        groups.push_back({{"node", node}, {"gpus", take}});
        if (!dry_run) {
          Status s = SubmitExtension(job, node, take);
          if (!s.ok()) {
            d["error"] = s.message();
            break;
          }
        }
        free_gpus[node] -= take;
        if (free_gpus[node] > 0) order.insert({-free_gpus[node], node});
        need -= take;
      }
      for (auto& k : skipped) order.insert(k);
      d["groups"] = groups;
      if (need > 0) {
        // Nodes had fewer free GPUs than the plan (they free up when other jobs shrink): the job
        // grows to what they had, with the batch of that size.
        d["wanted"] = target;
        d["target"] = target - need;
        d["target_batch"] = batch_for(target - need);
      }
      if (!dry_run) job.grow_batch = batch_at[id];  // each grow command carries its size's batch (OnReady)
      if (groups.empty()) {
        // None at all: the job keeps its size this epoch, and may change its batch at that size.
        if (DecideBatchChange(job, current, batch_for(current), frozen_jobs.count(id) > 0 || finishing.count(id) > 0,
                              gpus_per_node.count(job.gpu_type) ? gpus_per_node[job.gpu_type] : 1, config_.min_gain,
                              now, d) &&
            !dry_run) {
          QueueBatchChange(job, batch_for(current), current, d);
        }
      }
    } else if (target < current || !draining.empty()) {
      d["action"] = "shrink";
      std::vector<Extension*> groups;
      for (auto& [eid, e] : extensions_) {
        if (e.parent == id && e.Active() && e.state != "leaving") groups.push_back(&e);
      }
      // Groups leave in reverse order of joining (the runtime refuses any other): those not yet
      // joined first, then the latest joined. Two extensions ready in the same epoch may join in
      // either order, so the order of group ids is not the order of joining.
      std::sort(groups.begin(), groups.end(), [](Extension* a, Extension* b) {
        const bool a_in = a->state == "joined", b_in = b->state == "joined";
        if (a_in != b_in) return !a_in;
        if (a_in && a->joined_at != b->joined_at) return a->joined_at > b->joined_at;
        return a->group > b->group;
      });
      int level = current;
      nlohmann::json leaving = nlohmann::json::array();
      std::vector<Extension*> chosen;
      for (Extension* e : groups) {
        bool drain = std::find(draining.begin(), draining.end(), e->id) != draining.end();
        if (level <= target && !drain) continue;
        chosen.push_back(e);
        level -= e->gpus;
        leaving.push_back({{"group", e->group}, {"job", e->slurm_job}, {"gpus", e->gpus}, {"state", e->state}});
      }
      d["groups"] = leaving;
      if (!dry_run) {
        for (Extension* e : chosen) {
          if (e->state == "joined") {
            int from = CurrentGpus(job);
            e->state = "leaving";
            SaveExtension(*e);
            // The batch of the size this shrink leaves the job at (a drain may leave it below the
            // plan's target, and group sizes need not meet the target exactly).
            QueueCommand(id, {{"action", "shrink"}, {"group", e->group}, {"gpus", from - e->gpus},
                              {"global_batch", batch_for(from - e->gpus)}});
            db_->Run("INSERT INTO rescales (job_id, kind, grp, from_gpus, to_gpus, requested_at) VALUES (?, 'shrink', ?, ?, ?, ?)",
                     {int64_t{id}, int64_t{e->group}, int64_t{from}, int64_t{from - e->gpus}, now});
            Audit(std::nullopt, "shrink", id, {{"group", e->group}, {"from", from}, {"to", from - e->gpus}});
          } else if (e->state != "joining") {
            EndExtension(*e, "cancelled", "no longer in the plan", true);  // never joined: just cancel it
          }
        }
      }
    } else if (DecideBatchChange(job, current, target_batch, frozen_jobs.count(id) > 0 || finishing.count(id) > 0,
                                 gpus_per_node.count(job.gpu_type) ? gpus_per_node[job.gpu_type] : 1,
                                 config_.min_gain, now, d) &&
               !dry_run) {
      QueueBatchChange(job, target_batch, current, d);
    }
    decisions.push_back(d);
  }
  result.stage_ms["diff"] = ms_since(t_diff);
  result.stage_ms["slurm"] = slurm_ms;
  result.duration_ms = ms_since(t0) + slurm_ms;  // what the epoch row and the log report

  nlohmann::json plan_json{{"policy", config_.policy},
                           {"objective", planned ? plan.objective : 0.0},
                           {"bound", planned ? plan.bound : 0.0},
                           {"solve_ms", planned ? plan.solve_ms : 0.0},
                           {"jobs", snap.jobs.size()},
                           {"capacity", capacity},
                           {"decisions", decisions},
                           {"stage_ms", result.stage_ms}};
  result.plan = plan_json;
  if (!dry_run) {
    ++epochs_;
    nlohmann::json inputs{{"capacity", capacity}, {"jobs", snap.jobs.size()}, {"elastic", elastic_order.size()}};
    db_->Run("INSERT INTO epochs (started_at, duration_ms, policy, jobs, objective, inputs, decisions) VALUES (?,?,?,?,?,?,?)",
             {now, result.duration_ms, config_.policy, int64_t(snap.jobs.size()),
              planned ? SqlValue(plan.objective) : SqlValue(nullptr), inputs.dump(), decisions.dump()});
    Log(LogLevel::kVerbose, kComponent, "epoch ", epochs_, ": ", snap.jobs.size(), " jobs, ", result.duration_ms, " ms");
  }
  return result;
}

// ---------------------------------------------------------------- recovery
void Controller::Reconcile() {
  auto jobs_r = slurm_->LoadJobs();
  if (!jobs_r.ok()) {
    Log(LogLevel::kWarning, kComponent, "reconcile postponed: ", jobs_r.status().message());
    return;
  }
  const auto& sjobs = jobs_r.value();
  std::map<uint32_t, const JobInfo*> by_id;
  for (const auto& j : sjobs) by_id[j.id] = &j;

  // Extension jobs in Slurm: adopt what the database knows, cancel what it does not. A job is
  // an extension when its admin_comment says so (only administrators and elasticd set it), or,
  // for a submission interrupted before the comment was set, when it is held, carries the name
  // elasticd gives, belongs to the parent's owner and matches an intent in the database. A
  // user's own job that merely borrows the name is left alone.
  for (const auto& j : sjobs) {
    if (j.state != SlurmJobState::kPending && j.state != SlurmJobState::kRunning) continue;
    unsigned parent = 0;
    int group = 0;
    bool linked = std::sscanf(j.admin_comment.c_str(), "elastic-ext parent=%u group=%d", &parent, &group) == 2;
    if (!linked) {
      if (!j.held || std::sscanf(j.name.c_str(), "elastic-ext:%u:%d", &parent, &group) != 2) continue;
      Extension* intent = FindExtension(parent, group);
      auto owner = jobs_.find(parent);
      if (intent == nullptr || intent->state != "submitting" || owner == jobs_.end() || owner->second.uid != j.user_id) {
        continue;
      }
    }
    Extension* e = FindExtension(parent, group);
    if (e != nullptr && (e->slurm_job == 0 || e->slurm_job == j.id) && jobs_.count(parent)) {
      if (e->slurm_job == 0) {  // submitted before the crash, not yet recorded
        e->slurm_job = j.id;
        Log(LogLevel::kInfo, kComponent, "adopting extension job ", j.id, " of job ", parent);
      }
      if (e->state == "submitting") {
        std::string link = "elastic-ext parent=" + std::to_string(parent) + " group=" + std::to_string(group);
        Status s = j.admin_comment == link ? Status::Ok() : slurm_->SetAdminComment(j.id, link);
        if (s.ok() && j.held) s = slurm_->Release(j.id);
        e->state = s.ok() ? "submitted" : e->state;
      }
      SaveExtension(*e);
      continue;
    }
    Log(LogLevel::kInfo, kComponent, "cancelling extension job ", j.id, " that elasticd has no record of");
    slurm_->Cancel(j.id);
    Audit(std::nullopt, "cancel_unknown_extension", parent, {{"job", j.id}});
  }
  // Intents that never reached Slurm.
  std::vector<int64_t> stale;
  for (const auto& [id, e] : extensions_) {
    if (e.state == "submitting" && e.slurm_job == 0) stale.push_back(id);
  }
  for (int64_t id : stale) EndExtension(extensions_.at(id), "failed", "submission interrupted", false);
  // Rescales in flight: a grow whose command was not acknowledged is left to the runtime (it
  // acknowledges by command id, once); the epoch loop ends what Slurm no longer runs.
  Log(LogLevel::kInfo, kComponent, "reconciled with Slurm: ", jobs_.size(), " elastic jobs, ", extensions_.size(),
      " extensions");
}

}  // namespace elastic::controller
