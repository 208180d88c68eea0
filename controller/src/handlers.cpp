// The runtime channel's messages (docs/interfaces.md section 3): one table maps each message
// type to its handler and to who may send it, and the table's caller check runs before any
// handler does. A handler speaks for a job only once the check found the job and the caller's
// right to it.
//
// Over 600 lines, on purpose: the table and every handler it names stay together, so that who may
// send a message and what it does are read in one place (the relaunch path added its branches to
// the ready and ack handlers it shares with the in-place path). The work behind a handler lives
// in the controller's other files (lifecycle.cpp, epoch.cpp, moves.cpp, ...).
#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "controller.h"
#include "elastic/common/job_spec.h"
#include "type_moves.h"
#include "elastic/common/join_token.h"
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

// A number field: nullopt when absent or null; a protocol error when not a number.
std::optional<double> Number(const nlohmann::json& msg, const char* key) {
  auto it = msg.find(key);
  if (it == msg.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw Refuse(ErrorKind::kProtocol, std::string("field \"") + key + "\" is not a number");
  return it->get<double>();
}

// The noise scale for status: a number, or "inf" when the measured signal is below the noise.
nlohmann::json NoiseScaleJson(const optimizer::EfficiencyParams& p) {
  const double scale = NoiseScale(p);
  return std::isfinite(scale) ? nlohmann::json(scale) : nlohmann::json("inf");
}

}  // namespace

// Who may send a message. The check runs once, in Dispatch, before the handler.
enum class Controller::Caller {
  kAnyone,           // any authenticated uid (status)
  kPlugin,           // the SPANK plugin: root
  kJobOwner,         // the owner of msg.job, root or SlurmUser (the job's runtime and launcher)
  kOwnerOrOperator,  // the owner of msg.job, or an operator for another user's job (pause, resume)
  kOperator,         // a Slurm operator or administrator, root or SlurmUser (roles.h)
};

struct Controller::HandlerEntry {
  Caller caller;
  // kPlugin: what the plugin does ("registers jobs"); kOwnerOrOperator: what an operator does to
  // another user's job ("pausing"). Refusals name it.
  const char* what;
  Json (Controller::*handle)(const Request&);
};

const std::map<std::string, Controller::HandlerEntry>& Controller::Handlers() {
  static const std::map<std::string, HandlerEntry> table{
      {"register", {Caller::kPlugin, "registers jobs", &Controller::OnRegister}},
      {"register_extension", {Caller::kPlugin, "registers extension jobs", &Controller::OnRegisterExtension}},
      {"launcher", {Caller::kJobOwner, "", &Controller::OnLauncher}},
      {"metrics", {Caller::kJobOwner, "", &Controller::OnMetrics}},
      {"poll", {Caller::kJobOwner, "", &Controller::OnPoll}},
      {"ack", {Caller::kJobOwner, "", &Controller::OnAck}},
      {"ready", {Caller::kJobOwner, "", &Controller::OnReady}},
      {"left", {Caller::kJobOwner, "", &Controller::OnLeft}},
      {"ended", {Caller::kJobOwner, "", &Controller::OnEnded}},
      {"trial_done", {Caller::kJobOwner, "", &Controller::OnTrialDone}},
      {"status", {Caller::kAnyone, "", &Controller::OnStatus}},
      {"plan", {Caller::kOperator, "", &Controller::OnPlan}},
      {"snapshot", {Caller::kOperator, "", &Controller::OnSnapshot}},
      {"set_policy", {Caller::kOperator, "", &Controller::OnSetPolicy}},
      {"pause", {Caller::kOwnerOrOperator, "pausing", &Controller::OnPause}},
      {"resume", {Caller::kOwnerOrOperator, "resuming", &Controller::OnPause}},
      {"pause_all", {Caller::kOperator, "", &Controller::OnPauseAll}},
      {"resume_all", {Caller::kOperator, "", &Controller::OnPauseAll}},
  };
  return table;
}

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
  const int64_t id = msg.value("id", int64_t{0});
  auto it = Handlers().find(type);
  if (it == Handlers().end()) throw Refuse(ErrorKind::kProtocol, "unknown message type '" + type + "'");
  const HandlerEntry& entry = it->second;
  Request r{uid, msg, type, nullptr, std::nullopt};
  switch (entry.caller) {
    case Caller::kAnyone:
      break;
    case Caller::kPlugin:
      if (uid != 0) throw Refuse(ErrorKind::kPermission, std::string("only the plugin (root) ") + entry.what);
      break;
    case Caller::kJobOwner:
      r.job = &FindJob(msg);
      if (uid != r.job->uid && !roles_.IsRootOrSlurmUser(uid)) {
        throw Refuse(ErrorKind::kPermission,
                     "uid " + std::to_string(uid) + " does not own job " + std::to_string(r.job->id));
      }
      break;
    case Caller::kOwnerOrOperator:
      r.job = &FindJob(msg);
      if (uid != r.job->uid) {  // the owner may; for another user's job, the same role as pause_all
        r.as = roles_
                   .Require(uid, Role::kOperator,
                            "uid " + std::to_string(uid) + " does not own job " + std::to_string(r.job->id) + ": " +
                                entry.what + " another user's job")
                   .basis;
      }
      break;
    case Caller::kOperator:
      r.as = roles_.Require(uid, Role::kOperator, type).basis;
      break;
  }
  return wire::MakeReply(id, (this->*entry.handle)(r));
}

ElasticJob& Controller::FindJob(const nlohmann::json& msg) {
  uint32_t id = JobField(msg);
  auto it = registry_.jobs.find(id);
  if (it == registry_.jobs.end()) {
    throw Refuse(ErrorKind::kNotFound, "job " + std::to_string(id) + " is not a running elastic job");
  }
  return it->second;
}

nlohmann::json Controller::OnRegister(const Request& r) {
  uint32_t id = JobField(r.msg);
  auto info = slurm_->LoadJob(id);
  if (!info.ok()) throw Refuse(info.status().kind(), info.status().message());
  const JobInfo& j = info.value();
  if (j.state != SlurmJobState::kRunning) throw Refuse(ErrorKind::kInvalidArgument, "job " + std::to_string(id) + " is not running");
  if (Field<uint32_t>(r.msg, "user", j.user_id) != j.user_id) {
    throw Refuse(ErrorKind::kPermission, "job " + std::to_string(id) + " does not belong to that user");
  }
  if (auto member = FusedMemberReply(id, r.msg)) return *member;
  ElasticJob job;
  auto old = registry_.jobs.find(id);
  if (old != registry_.jobs.end()) job = old->second;  // a restarted batch step registers again
  // A job elasticd moved to another GPU type: what it knew of it comes back (moves.cpp).
  if (auto moved = FinishMove(id, j.gpu_type, Now())) job = std::move(*moved);
  // A requeued job registers afresh: its group ids continue after those it used before.
  job.next_group = std::max(job.next_group, records::MaxGroup(*db_, id) + 1);
  restarts_.erase(id);
  // A (re)started program: its batch and progress start afresh (rules already logged stay quiet).
  job.trust.batch_confirmed = false;
  job.trust.mark.reset();
  job.id = id;
  job.uid = j.user_id;
  job.gid = j.group_id;
  job.user = j.user;
  job.account = j.account;
  job.partition = j.partition;
  job.gpu_type = j.gpu_type;
  job.base_gpus = j.gpus;
  job.spec = r.msg.value("spec", Json::object());
  job.state = "running";
  job.init_token = contract::NewJoinToken().value();
  if (job.registered_at == 0) job.registered_at = Now();
  Json fuse;
  if (contract::JobSpec::FromJson(job.spec).Fused() && r.msg.value("array_job", 0u) != 0) {
    fuse = BecomeSweepLeader(job, r.msg);
  }
  registry_.jobs[id] = job;
  SaveJob(job);
  SetGpus(registry_.jobs[id], registry_.CurrentGpus(job));
  Audit(r.uid, "register", id, {{"gpus", job.base_gpus}, {"spec", job.spec}, {"user", job.user}});
  Log(LogLevel::kInfo, kComponent, "registered elastic job ", id, " of ", job.user, " at ", job.base_gpus, " ",
      job.gpu_type, " GPUs");
  Json reply{{"mode", "elastic"}, {"join_token", job.init_token}, {"epoch_s", config_.epoch_s}};
  if (!fuse.is_null()) reply["fuse"] = fuse;
  return reply;
}

nlohmann::json Controller::OnRegisterExtension(const Request& r) {
  uint32_t ext_job = JobField(r.msg);
  Extension* e = registry_.FindExtensionBySlurmJob(ext_job);
  if (e == nullptr) throw Refuse(ErrorKind::kNotFound, "job " + std::to_string(ext_job) + " is not an extension elasticd submitted");
  auto parent = registry_.jobs.find(e->parent);
  if (parent == registry_.jobs.end()) throw Refuse(ErrorKind::kNotFound, "the parent of extension job " + std::to_string(ext_job) + " is not running");
  auto info = slurm_->LoadJob(ext_job);
  if (!info.ok()) throw Refuse(info.status().kind(), info.status().message());
  if (!IsExtensionOf(info.value(), parent->second, *e)) {
    throw Refuse(ErrorKind::kPermission, "job " + std::to_string(ext_job) + " does not match elasticd's record of it");
  }
  const Json& launcher = parent->second.launcher;
  if (!launcher.is_object() || !launcher.contains("rendezvous_uri")) {
    throw Refuse(ErrorKind::kUnavailable, "the parent's launcher has not reported its rendezvous yet");
  }
  if (e->state == ExtState::kSubmitted || e->state == ExtState::kSubmitting) {
    e->MoveTo(ExtState::kRegistered);
    SaveExtension(*e);
  }
  return {{"parent", e->parent},
          {"group", e->group},
          {"join_token", e->token},
          {"rendezvous_uri", launcher["rendezvous_uri"]},
          {"spec", parent->second.spec}};
}

nlohmann::json Controller::OnLauncher(const Request& r) {
  ElasticJob& job = *r.job;
  Json launcher{{"rendezvous_uri", Field<std::string>(r.msg, "rendezvous_uri", "")},
                {"argv", r.msg.value("argv", Json::array())},
                {"launcher_args", r.msg.value("launcher_args", Json::array())},
                {"cwd", Field<std::string>(r.msg, "cwd", "")},
                {"env", r.msg.value("env", Json::object())},
                {"topology", r.msg.value("topology", Json::object())},
                {"grows_onto", Field<std::string>(r.msg, "grows_onto", "any_node")},
                {"rank_agent", Field<bool>(r.msg, "rank_agent", false)},
                {"ranks", Field<int>(r.msg, "ranks", 0)}};
  if (launcher["grows_onto"] != "any_node" && launcher["grows_onto"] != "leader_node" &&
      launcher["grows_onto"] != "relaunch")
    throw Refuse(ErrorKind::kProtocol, "\"grows_onto\" must be \"any_node\", \"leader_node\" or \"relaunch\"");
  if (launcher["ranks"].get<int>() < 0) throw Refuse(ErrorKind::kProtocol, "\"ranks\" must be >= 0");
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

nlohmann::json Controller::OnMetrics(const Request& r) {
  ElasticJob& job = *r.job;
  // Sample counts as numbers within [0, 1e18] (any JSON number; larger ones are refused).
  auto count = [&](const char* key) -> int64_t {
    const double v = Field<double>(r.msg, key, 0.0);
    if (!(v >= 0.0 && v <= 1e18)) throw Refuse(ErrorKind::kProtocol, std::string("field \"") + key + "\" out of range");
    return static_cast<int64_t>(v);
  };
  const int64_t done = count("samples");
  const int64_t total = count("total_samples");
  const double now = Now();

  // What the job's runtime says, and what elasticd expects of it (metrics_check.h).
  MetricsReport report;
  report.gpus = Number(r.msg, "gpus");
  report.global_batch = Number(r.msg, "global_batch");
  report.local_batch = Number(r.msg, "local_batch");
  report.step_time_s = Number(r.msg, "step_time_s");
  report.grad_sqr = Number(r.msg, "grad_sqr");
  report.grad_var = Number(r.msg, "grad_var");
  report.lr_factor = Number(r.msg, "lr_factor");
  report.samples = done;
  report.accumulates = Field<double>(r.msg, "accum_steps", 0.0) != 0.0;
  MetricsExpectation expect;
  expect.job = job.id;
  std::tie(expect.gpus_min, expect.gpus_max) = registry_.ReportableGpus(job);
  const contract::JobSpec spec = job.Spec();
  if (spec.batch.min) expect.batch_min = std::max<int64_t>(1, *spec.batch.min);
  if (spec.batch.max) expect.batch_max = *spec.batch.max;
  if (job.trust.batch_confirmed && job.batch > 0) {
    expect.batches = {job.batch};
    // Another batch is expected only from a command not yet acknowledged (asked only then).
    if (report.global_batch && *report.global_batch != static_cast<double>(job.batch)) {
      for (int64_t b : records::PendingCommandBatches(*db_, job.id)) {
        if (std::find(expect.batches.begin(), expect.batches.end(), b) == expect.batches.end()) expect.batches.push_back(b);
      }
    }
  }
  expect.previous = job.trust.mark;
  expect.now = now;
  const MetricsVerdict v = CheckMetrics(report, expect);
  for (const auto* findings : {&v.refused, &v.clamped}) {
    for (const MetricsFinding& f : *findings) {
      const uint32_t bit = 1u << static_cast<unsigned>(f.rule);
      if (job.trust.logged & bit) continue;  // once per job and rule
      job.trust.logged |= bit;
      Log(LogLevel::kWarning, kComponent, "job ", job.id, " of ", job.user, ": metrics ",
          findings == &v.refused ? "refused" : "clamped", " (", MetricsRuleName(f.rule), "): ", f.message,
          " (not logged again for this job)");
    }
  }

  if (v.batch) {
    job.batch = *v.batch;
    job.trust.batch_confirmed = true;
  }
  job.trust.mark = v.mark;
  if (v.step) {
    int nodes = 1;  // the groups of a job: base nodes plus one node per joined extension
    std::set<std::string> hosts;
    for (const auto& [id, e] : registry_.extensions) {
      if (e.parent == job.id && e.state == ExtState::kJoined) hosts.insert(e.node);
    }
    nodes += static_cast<int>(hosts.size());
    job.samples.push_back({nodes, v.step->gpus, v.step->local_batch, v.step->step_time_s});
    if (job.samples.size() > kMaxSamples) job.samples.erase(job.samples.begin());
  }
  if (done > 0) job.samples_done = done;
  if (total > 0) job.total_samples = total;
  // grad_sqr = |g|^2 and grad_var = tr(Sigma) per sample, expressed at B0 = the job's minimum
  // batch (its current one without bounds); kept until the runtime measures them again.
  if (v.grad_stats_ok) {
    const double b0 = static_cast<double>(spec.batch.min.value_or(static_cast<int>(std::max<int64_t>(job.batch, 1))));
    if (auto eff = EfficiencyFromMetrics(*report.grad_sqr, *report.grad_var, b0)) job.efficiency = eff;
  }
  if (v.lr_factor) job.lr_factor = *v.lr_factor;
  job.metrics_at = now;
  ++job.metrics_received;
  SaveJob(job);
  if (job.metrics_received == 1) NotifyEvent("job " + std::to_string(job.id) + " reported its first step");
  return v.ReplyJson();
}

nlohmann::json Controller::OnPoll(const Request& r) {
  ElasticJob& job = *r.job;
  return {{"commands", DeliverCommands(job)}, {"paused", job.paused || paused_all_}};
}

nlohmann::json Controller::OnAck(const Request& r) {
  ElasticJob& job = *r.job;
  int64_t cmd = Field<int64_t>(r.msg, "command", 0);
  std::optional<records::StoredCommand> stored = records::FindCommand(*db_, cmd, job.id);
  if (!stored || stored->body.is_null()) throw Refuse(ErrorKind::kNotFound, "job " + std::to_string(job.id) + " has no command " + std::to_string(cmd));
  if (stored->acknowledged) return {{"duplicate", true}};  // acks are idempotent
  bool ok = Field<bool>(r.msg, "ok", false);
  Json phases = r.msg.value("phases", Json::object());
  double now = Now();
  records::FinishCommand(*db_, cmd, ok, now, r.msg.dump());
  std::string action = stored->body.value("action", "");
  // A relaunch carries out a grow or a shrink of a relaunch group ("op"): the same steps follow.
  if (action == "relaunch") action = stored->body.value("op", "");
  double pause = phases.is_object() && phases.contains("pause_s") && phases["pause_s"].is_number()
                     ? phases["pause_s"].get<double>()
                     : 0.0;
  // A relaunch that several groups join in names them all (command_delivery.cpp); each finishes.
  std::vector<int> groups;
  if (stored->body.contains("groups") && stored->body["groups"].is_array()) {
    for (const auto& g : stored->body["groups"]) groups.push_back(g.get<int>());
  } else {
    groups.push_back(stored->body.value("group", 0));
  }
  const std::string error = Field<std::string>(r.msg, "error", "no reason given");
  // One relaunch, one pause: the first group's record carries it (reports deduct it once).
  for (size_t k = 0; k < groups.size(); ++k) {
    FinishGroupCommand(r.uid, job, action, groups[k], ok, error, k == 0 ? pause : 0.0,
                       k == 0 ? phases : Json{{"with_group", groups[0]}}, now);
  }
  if (action == "checkpoint") OnMoveCheckpoint(job, cmd, ok, Field<std::string>(r.msg, "error", "no reason given"));
  if (action == "set_batch") {
    if (job.batch_command == cmd) job.batch_command = 0;
    if (ok) {
      job.last_rescale_at = now;  // a batch change counts for min_rescale_interval too
      Audit(r.uid, "batch_set", job.id, {{"from", job.batch}, {"to", r.msg.value("global_batch", Json())}});
    }
  }
  // The batch the runtime runs at now: the command's or the one it had (metrics_check.h, rule batch).
  if (r.msg.contains("global_batch") && r.msg["global_batch"].is_number_integer()) {
    const int64_t b = r.msg["global_batch"];
    const Json commanded = stored->body.value("global_batch", Json());
    const contract::JobSpec spec = job.Spec();
    const bool in_bounds = b >= std::max<int64_t>(1, spec.batch.min.value_or(1)) &&
                           (!spec.batch.max || b <= *spec.batch.max);
    if (in_bounds && (b == job.batch || !job.trust.batch_confirmed ||
                      (commanded.is_number_integer() && b == commanded.get<int64_t>()))) {
      job.batch = b;
      job.trust.batch_confirmed = true;
    } else if (const uint32_t bit = 1u << static_cast<unsigned>(MetricsRule::kBatch); !(job.trust.logged & bit)) {
      job.trust.logged |= bit;
      Log(LogLevel::kWarning, kComponent, "job ", job.id, " of ", job.user, ": ack of command ", cmd,
          " refused (batch): global_batch ", b, " is outside the job's bounds or neither the command's nor the job's batch (",
          job.batch, ") (not logged again for this job)");
    }
  }
  job.trust.mark.reset();  // the command's pause is no training: a new progress window begins
  if (double lr = Field<double>(r.msg, "lr_factor", 0.0); std::isfinite(lr) && lr > 0) job.lr_factor = lr;
  SaveJob(job);
  if (action == "grow" || action == "shrink") {
    NotifyEvent("job " + std::to_string(job.id) + (ok ? " finished a " : " failed a ") + action);
  }
  return Json::object();
}

nlohmann::json Controller::OnReady(const Request& r) {
  ElasticJob& job = *r.job;
  int group = Field<int>(r.msg, "group", 0);
  Extension* e = registry_.FindExtension(job.id, group);
  if (e == nullptr) throw Refuse(ErrorKind::kNotFound, "job " + std::to_string(job.id) + " has no pending group " + std::to_string(group));
  if (e->state == ExtState::kJoining || e->state == ExtState::kJoined) return {{"duplicate", true}};
  if (e->state != ExtState::kRegistered && e->state != ExtState::kSubmitted) {
    throw Refuse(ErrorKind::kInvalidArgument, "group " + std::to_string(group) + " is " +
                                                  std::string(ExtStateName(e->state)) + ", not waiting to join");
  }
  int from = registry_.CurrentGpus(job);
  e->MoveTo(ExtState::kJoining);
  e->joining_at = Now();  // its join or relaunch has extensions.ready_timeout from now (lifecycle.cpp)
  SaveExtension(*e);
  // The batch the plan chose for the size this group brings the job to (the current one when it
  // chose none): a growth in several groups passes through each size at that size's batch.
  auto planned_batch = job.grow_batch.find(from + e->gpus);
  const int64_t batch = planned_batch != job.grow_batch.end() ? planned_batch->second : job.batch;
  if (job.relaunch_groups.count(group)) {
    // Its launcher holds the node and starts no ranks: the world is started again over it (the
    // world as it is when the command is sent: command_delivery.cpp).
    if (auto world = RelaunchWorldFor(job, {group}, {}); !world.ok() && world.status().kind() == ErrorKind::kInvalidArgument) {
      EndExtension(*e, ExtState::kFailed, "grow by relaunch: " + world.status().message(), true);
      return Json::object();
    }
    QueueCommand(job.id, {{"action", "relaunch"}, {"op", "grow"}, {"group", group}, {"gpus", from + e->gpus},
                          {"global_batch", batch}});
  } else {
    QueueCommand(job.id, {{"action", "grow"}, {"group", group}, {"join_token", e->token}, {"gpus", from + e->gpus},
                          {"global_batch", batch}});
  }
  records::StartRescale(*db_, job.id, "grow", group, from, from + e->gpus, Now());
  Audit(r.uid, "grow", job.id, {{"group", group}, {"from", from}, {"to", from + e->gpus}, {"node", e->node}});
  return Json::object();
}

nlohmann::json Controller::OnLeft(const Request& r) {
  ElasticJob& job = *r.job;
  int group = Field<int>(r.msg, "group", 0);
  Extension* e = registry_.FindExtension(job.id, group);
  if (e == nullptr) return {{"duplicate", true}};
  EndExtension(*e, ExtState::kLeft, Field<std::string>(r.msg, "reason", "left"), true);
  job.last_rescale_at = Now();
  job.trust.mark.reset();
  SaveJob(job);
  NotifyEvent("job " + std::to_string(job.id) + ": group " + std::to_string(group) + " left");
  return Json::object();
}

nlohmann::json Controller::OnEnded(const Request& r) {
  ElasticJob& job = *r.job;
  const uint32_t id = job.id;
  EndJob(job, "ended (exit code " + std::to_string(Field<int>(r.msg, "exit_code", 0)) + ")");
  NotifyEvent("job " + std::to_string(id) + " ended");
  return Json::object();
}

namespace {

// The job's speed per GPU (samples/s) on each type it accepts: measured, or from the site's table.
nlohmann::json SpeedsJson(const ElasticJob& job, const ControllerConfig& config) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& t : job.Spec().GpuTypes()) {
    if (auto s = SpeedPerGpu(job, t, config)) out[t] = {{"samples_per_s", *s}, {"measured", job.type_speed.count(t) > 0 ||
                                                                              (t == job.gpu_type && MeasuredSpeedPerGpu(job))}};
  }
  return out;
}

}  // namespace

nlohmann::json Controller::OnStatus(const Request& r) {
  // Slurm's PrivateData decides whose jobs the caller sees (roles.h, JobVisibility).
  const JobVisibility visibility = roles_.Visibility(r.uid);
  Json jobs = Json::array();
  for (const auto& [id, job] : registry_.jobs) {
    if (!visibility.all && job.uid != r.uid) continue;
    Json exts = Json::array();
    for (const auto& [eid, e] : registry_.extensions) {
      if (e.parent != id) continue;
      exts.push_back({{"job_id", e.slurm_job}, {"group", e.group}, {"node", e.node}, {"gpus", e.gpus},
                      {"state", ExtStateName(e.state)}});
    }
    jobs.push_back({{"job_id", id},
                    {"user", job.user},
                    {"account", job.account},
                    {"gpu_type", job.gpu_type},
                    {"base_gpus", job.base_gpus},
                    {"gpus", registry_.CurrentGpus(job)},
                    {"planned_gpus", registry_.PlannedGpus(job)},
                    {"max_gpus", job.Spec().GpusMax(job.base_gpus)},
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
                    {"fuse", job.fuse.is_object() ? Json{{"array_job", job.fuse.value("array_job", 0u)},
                                                         {"trials", job.fuse.value("trials", Json::array())},
                                                         {"done", job.fuse.value("done", Json::object()).size()}}
                                                  : Json()},
                    {"gpu_types", job.Spec().GpuTypes()},
                    {"speed_per_gpu", SpeedsJson(job, config_)},
                    {"extensions", exts}});
  }
  // Moves in flight (moves.cpp), also of jobs Slurm holds requeued (not in `jobs` meanwhile).
  Json moves = Json::array();
  for (const auto& m : MovesJson()) {
    const uint32_t id = m["job_id"];
    auto it = registry_.jobs.find(id);
    const uint32_t owner = it != registry_.jobs.end() ? it->second.uid : m.value("uid", 0u);
    if (!visibility.all && owner != r.uid) continue;
    Json shown = m;
    shown.erase("uid");
    moves.push_back(shown);
  }
  Json reply{{"jobs", jobs}, {"moves", moves}, {"paused", paused_all_}, {"policy", config_.policy},
             {"epoch", epochs_}, {"epoch_s", config_.epoch_s}};
  if (!visibility.all) reply["only_own_jobs"] = visibility.why;
  return reply;
}

nlohmann::json Controller::OnPlan(const Request&) {
  EpochResult r = RunEpoch(/*dry_run=*/true);
  return {{"plan", r.plan}, {"duration_ms", r.duration_ms}};
}

nlohmann::json Controller::OnSnapshot(const Request&) {
  auto nodes = slurm_->LoadNodes();
  if (!nodes.ok()) throw Refuse(nodes.status().kind(), nodes.status().message());
  auto jobs = slurm_->LoadJobs();
  if (!jobs.ok()) throw Refuse(jobs.status().kind(), jobs.status().message());
  return {{"snapshot", SnapshotToJson(nodes.value(), jobs.value(), registry_.JobsJson())}};
}

nlohmann::json Controller::OnPause(const Request& r) {
  const bool pause = r.type == "pause";
  ElasticJob& job = *r.job;
  Json detail = Json::object();
  if (r.as) detail["as"] = *r.as;  // another user's job, paused by an operator
  job.paused = pause;
  SaveJob(job);
  Audit(r.uid, pause ? "pause" : "resume", job.id, detail);
  NotifyEvent(std::string(pause ? "pause" : "resume") + " of job " + std::to_string(job.id));
  return Json::object();
}

nlohmann::json Controller::OnPauseAll(const Request& r) {
  const bool pause = r.type == "pause_all";
  paused_all_ = pause;
  Audit(r.uid, pause ? "pause_all" : "resume_all", 0, {{"as", r.as.value_or("")}});
  NotifyEvent(pause ? "pause_all" : "resume_all");
  return Json::object();
}

nlohmann::json Controller::OnSetPolicy(const Request& r) {
  std::string name = Field<std::string>(r.msg, "policy", "");
  auto policy = optimizer::MakePolicy(name);
  if (!policy.ok()) throw Refuse(ErrorKind::kInvalidArgument, policy.status().message());
  config_.policy = name;
  Audit(r.uid, "set_policy", 0, {{"policy", name}, {"as", r.as.value_or("")}});
  NotifyEvent("policy " + name);
  return Json::object();
}


}  // namespace elastic::controller
