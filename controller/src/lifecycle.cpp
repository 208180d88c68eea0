// The life cycle of extension jobs and of the elastic jobs they extend: submitting an extension
// (intent first, then Slurm), ending one, ending a job, keeping the registry in line with Slurm
// each epoch, requeueing jobs whose world was lost, and the reconciliation after a restart.
#include <pwd.h>

#include <algorithm>

#include "controller.h"
#include "elastic/common/env_vars.h"
#include "elastic/common/exit_codes.h"
#include "elastic/common/extension_link.h"
#include "elastic/common/join_token.h"
#include "elastic/common/log.h"
#include "relaunch_world.h"

namespace elastic::controller {
namespace {

constexpr const char* kComponent = "controller";

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

// The admin_comment that links an extension job to its parent (only administrators and elasticd
// can set it: docs/interfaces.md section 4).
std::string ExtensionLink(uint32_t parent, int group) { return contract::ExtensionLink{parent, group}.AdminComment(); }

}  // namespace

void Controller::EndExtension(Extension& e, ExtState state, const std::string& reason, bool cancel) {
  uint32_t parent = e.parent;
  bool was_joined = e.InWorld();
  if (cancel && e.slurm_job != 0 && slurm_ != nullptr) {  // none: a controller on recorded snapshots
    Status s = slurm_->Cancel(e.slurm_job);
    if (!s.ok()) Log(LogLevel::kWarning, kComponent, "cannot cancel extension job ", e.slurm_job, ": ", s.message());
  }
  records::SetExtensionReason(*db_, e.id, reason);
  Audit(std::nullopt, "extension_" + std::string(ExtStateName(state)), parent,
        {{"group", e.group}, {"job", e.slurm_job}, {"reason", reason}});
  Extension copy = e;
  copy.MoveTo(state);
  SaveExtension(copy);  // erases it from the registry: `e` is gone after this
  auto it = registry_.jobs.find(parent);
  if (it != registry_.jobs.end() && it->second.relaunch_groups.erase(copy.group) > 0) SaveJob(it->second);
  if (was_joined && it != registry_.jobs.end() && it->second.state == "running") {
    SetGpus(it->second, registry_.CurrentGpus(it->second));
  }
  if (state == ExtState::kFailed && it != registry_.jobs.end()) {
    // Do not retry at once: a failing extension would otherwise be resubmitted every epoch.
    it->second.grow_backoff_until = Now() + std::max(config_.min_rescale_interval_s, 5 * config_.epoch_s);
    SaveJob(it->second);
  }
}

void Controller::EndJob(ElasticJob& job, const std::string& why) {
  std::vector<int64_t> ids;
  for (const auto& [id, e] : registry_.extensions) {
    if (e.parent == job.id) ids.push_back(id);
  }
  for (int64_t id : ids) {
    auto it = registry_.extensions.find(id);
    if (it != registry_.extensions.end()) EndExtension(it->second, ExtState::kCancelled, "parent " + why, true);
  }
  records::CancelCommands(*db_, job.id);
  EndSweep(job);
  job.state = "ended";
  SetGpus(job, 0);
  SaveJob(job);
  Audit(std::nullopt, "ended", job.id, {{"why", why}});
  Log(LogLevel::kInfo, kComponent, "elastic job ", job.id, " ", why);
  registry_.jobs.erase(job.id);
}

void Controller::SyncWithSlurm(const std::map<uint32_t, const JobInfo*>& by_id, double now) {
  std::vector<uint32_t> gone;
  for (auto& [id, job] : registry_.jobs) {
    auto it = by_id.find(id);
    if (it == by_id.end() || it->second->state != SlurmJobState::kRunning) gone.push_back(id);
  }
  for (uint32_t id : gone) {
    auto it = by_id.find(id);
    const JobInfo* info = it == by_id.end() ? nullptr : it->second;
    if (info != nullptr && info->state == SlurmJobState::kEnded && info->exit_code == kExitWorldLost) {
      EndJob(registry_.jobs.at(id), "ended with exit code 75: a rank of its world died");
      if (config_.restart_world_lost) {
        records::MarkRestart(*db_, id);
        restarts_.insert(id);
      }
      continue;
    }
    if (EndForMove(registry_.jobs.at(id))) continue;  // requeued by elasticd to move it to another GPU type
    EndJob(registry_.jobs.at(id), "is no longer running in Slurm");
  }
  RestartLostWorlds(by_id);
  std::vector<int64_t> ext_ids;
  for (const auto& [id, e] : registry_.extensions) ext_ids.push_back(id);
  for (int64_t id : ext_ids) {
    auto eit = registry_.extensions.find(id);
    if (eit == registry_.extensions.end()) continue;
    Extension& e = eit->second;
    auto it = by_id.find(e.slurm_job);
    bool alive = e.slurm_job != 0 && it != by_id.end() &&
                 (it->second->state == SlurmJobState::kPending || it->second->state == SlurmJobState::kRunning);
    if (e.state != ExtState::kSubmitting && !alive) {
      EndedFromOutside(e, now);
      continue;
    }
    // ready_timeout to be ready (from its submission: Slurm starts it, its launcher registers and
    // says ready), and again for the join or relaunch that follows (a relaunch waits for the
    // commands queued before it).
    const double since = e.state == ExtState::kJoining && e.joining_at > 0 ? e.joining_at : e.created_at;
    if (!e.InWorld() && now - since > config_.ready_timeout_s) {
      if (e.state == ExtState::kJoining) {
        records::CancelGroupCommands(*db_, e.parent, e.group);
        QueueCommand(e.parent, {{"action", "cancel_grow"}, {"group", e.group}});
      }
      EndExtension(e, ExtState::kFailed,
                   "did not join within " + std::to_string(static_cast<int>(config_.ready_timeout_s)) + " s", true);
      continue;
    }
    if (e.state == ExtState::kLeaving && config_.leave_timeout_s > 0) {
      if (e.leaving_at <= 0) e.leaving_at = now;  // no shrink on record: the deadline starts now
      if (now - e.leaving_at > config_.leave_timeout_s) EndOverdueLeave(e, now);
    }
  }
}

// An extension job that ended without elasticd ending it (scancel, preemption, its time limit,
// a failure): its group is out of the job. A relaunch group's ranks on another node than the
// job's got SIGTERM from Slurm and their world is started again without that node by the
// runtime itself (docs/runtime.md, "A node taken away"); those of a relaunch group on the job's
// own node run in the job's step there (relaunch_world.h), which the end of the extension job
// does not reach: without a relaunch they would go on using GPUs Slurm has given back.
void Controller::EndedFromOutside(Extension& e, double now) {
  const bool in_world = e.InWorld();
  const uint32_t parent = e.parent;
  const int group = e.group;
  const int gpus = e.gpus;
  const uint32_t slurm_job = e.slurm_job;
  auto it = registry_.jobs.find(parent);
  const bool on_leader = in_world && it != registry_.jobs.end() && it->second.state == "running" &&
                         it->second.relaunch_groups.count(group) > 0 && !it->second.leader_node.empty() &&
                         e.node == it->second.leader_node;
  EndExtension(e, in_world ? ExtState::kLeft : ExtState::kFailed, "extension job ended", false);  // `e` is gone
  if (!on_leader) return;
  ElasticJob& job = it->second;
  const int to = registry_.CurrentGpus(job);
  Log(LogLevel::kWarning, kComponent, "job ", job.id, ": extension job ", slurm_job, " (group ", group, ", ", gpus,
      " GPUs on the job's own node ", job.leader_node, ") ended from outside; its ranks run in the job's step there: "
      "the world is started again without them");
  QueueCommand(job.id, {{"action", "relaunch"}, {"op", "shrink"}, {"group", group}, {"gpus", to}});
  records::StartRescale(*db_, job.id, "shrink", group, to + gpus, to, now);
  Audit(std::nullopt, "shrink", job.id, {{"group", group}, {"from", to + gpus}, {"to", to}, {"why", "extension job ended"}});
}

// A joined extension was told to leave, but its job reached no rescale point within
// extensions.leave_timeout (a step that hangs, or a program that stopped calling RescalePoint):
// its GPUs would stay held by a group that never goes. The extension job is cancelled. Without
// ULFM the job's MPI world cannot lose ranks outside a rescale point: the parent's collectives
// fail, it exits 75 and the lost-world recovery (RestartLostWorlds) requeues it from its last
// checkpoint.
void Controller::EndOverdueLeave(Extension& e, double now) {
  const int waited = static_cast<int>(now - e.leaving_at);
  const int limit = static_cast<int>(config_.leave_timeout_s);
  Log(LogLevel::kWarning, kComponent, "job ", e.parent, ": group ", e.group, " (extension job ", e.slurm_job,
      ") was told to leave ", waited, " s ago, but the job reached no rescale point within extensions.leave_timeout (",
      limit, " s): cancelling the extension job. Without ULFM the job's MPI world breaks when those ranks end: "
      "the job exits 75 and is requeued from its last checkpoint (recovery.restart_world_lost)");
  Audit(std::nullopt, "leave_timeout", e.parent,
        {{"group", e.group}, {"job", e.slurm_job}, {"waited_s", waited}, {"leave_timeout_s", limit}});
  records::CancelGroupCommands(*db_, e.parent, e.group);
  records::FinishRescale(*db_, e.parent, e.group, "shrink", false, 0.0,
                         {{"error", "no rescale point within extensions.leave_timeout"}}, now);
  EndExtension(e, ExtState::kFailed,
               "did not leave within " + std::to_string(limit) + " s: the job reached no rescale point", true);
}

void Controller::FinishRestart(uint32_t job, const std::string& action, const Json& detail) {
  restarts_.erase(job);
  records::EndRestart(*db_, job);
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

Status Controller::SubmitExtension(ElasticJob& job, const std::string& node, int gpus, bool by_relaunch) {
  if (!job.launcher.is_object()) return Status(ErrorKind::kUnavailable, "the job's launcher has not registered");
  Extension e;
  e.parent = job.id;
  e.group = job.next_group++;
  if (by_relaunch) job.relaunch_groups.insert(e.group);
  e.node = node;
  e.gpu_type = job.gpu_type;
  e.gpus = gpus;
  e.account = job.account;
  e.token = contract::NewJoinToken().value();
  e.state = ExtState::kSubmitting;
  e.created_at = Now();
  SaveJob(job);       // next_group first: a group id is never used twice
  SaveExtension(e);   // the intent, before Slurm knows anything

  auto parent = slurm_->LoadJob(job.id);
  if (!parent.ok() || parent.value().state != SlurmJobState::kRunning) {
    EndExtension(e, ExtState::kFailed, "parent not running", false);
    return Status(ErrorKind::kUnavailable, "the parent is not running");
  }
  int64_t limit_min = config_.extension_max_time_min;
  if (parent.value().time_limit_s > 0 && parent.value().end_time > 0) {
    int64_t remaining = (parent.value().end_time - static_cast<int64_t>(Now())) / 60;
    limit_min = std::min(limit_min, remaining);
  }
  if (limit_min < std::max<int64_t>(1, static_cast<int64_t>(2 * config_.epoch_s / 60))) {
    EndExtension(e, ExtState::kFailed, "parent ends too soon", false);
    return Status(ErrorKind::kUnavailable, "the parent ends too soon for an extension");
  }

  ExtensionSubmission sub;
  sub.name = contract::ExtensionLink{job.id, e.group}.JobName();
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
                       " --join" + std::string(by_relaunch ? " --hold" : "");
  for (const auto& a : job.launcher.value("launcher_args", Json::array())) script += " " + ShellQuote(a.get<std::string>());
  // Its ranks inside this job where the rendezvous's daemon would start them in the base job
  // (relaunch_world.h); double quotes: the shell puts in the job and node.
  if (!by_relaunch && job.launcher.value("rank_agent", false)) script += " --rank-agent \"" + RankAgentForScript() + "\"";
  script += " --";
  for (const auto& a : job.launcher["argv"]) script += " " + ShellQuote(a.get<std::string>());
  sub.script = script + "\n";
  // The parent's environment as its launcher registered it (contract: env_vars.h), but Slurm's
  // and the launchers' own and what elasticd sets here (an old or forged registration included).
  const passwd* pw = getpwuid(job.uid);
  for (const auto& [k, v] : job.launcher["env"].items()) {
    if (contract::NeverCarriedToExtensions(k) || (pw != nullptr && k == "HOME")) continue;
    sub.environment.push_back(k + "=" + v.get<std::string>());
  }
  sub.environment.push_back("_SLURM_SPANK_OPTION_elastic_elastic_extension=" + std::to_string(job.id) + ":" +
                            std::to_string(e.group));
  if (pw != nullptr) sub.environment.push_back(std::string("HOME=") + pw->pw_dir);

  auto submitted = slurm_->SubmitHeld(sub);
  if (!submitted.ok()) {
    EndExtension(e, ExtState::kFailed, submitted.status().message(), false);
    return submitted.status();
  }
  e.slurm_job = submitted.value();
  SaveExtension(e);
  Status s = slurm_->SetAdminComment(e.slurm_job, ExtensionLink(job.id, e.group));
  if (s.ok()) s = slurm_->Release(e.slurm_job);
  if (!s.ok()) {
    EndExtension(e, ExtState::kFailed, s.message(), true);
    return s;
  }
  e.MoveTo(ExtState::kSubmitted);
  SaveExtension(e);
  Audit(std::nullopt, "extend", job.id, {{"group", e.group}, {"job", e.slurm_job}, {"node", node}, {"gpus", gpus}});
  Log(LogLevel::kInfo, kComponent, "job ", job.id, ": extension ", e.slurm_job, " (group ", e.group, ", ", gpus,
      " GPUs on ", node, ")");
  return Status::Ok();
}

bool Controller::IsExtensionOf(const JobInfo& j, const ElasticJob& parent, const Extension& e) const {
  return j.admin_comment == ExtensionLink(parent.id, e.group) && j.user_id == parent.uid;
}

void Controller::QueueBatchChange(ElasticJob& job, int64_t batch, int gpus, const Json& decision) {
  job.batch_command = QueueCommand(job.id, {{"action", "set_batch"}, {"global_batch", batch}});
  job.batch_command_at = Now();
  SaveJob(job);
  Audit(std::nullopt, "set_batch", job.id, {{"from", job.batch}, {"to", batch}, {"gpus", gpus}, {"gain", decision["gain"]}});
}

void Controller::Reconcile() {
  auto jobs_r = slurm_->LoadJobs();
  if (!jobs_r.ok()) {
    Log(LogLevel::kWarning, kComponent, "reconcile postponed: ", jobs_r.status().message());
    return;
  }
  const auto& sjobs = jobs_r.value();

  // Extension jobs in Slurm: adopt what the database knows, cancel what it does not. A job is
  // an extension when its admin_comment says so (only administrators and elasticd set it), or,
  // for a submission interrupted before the comment was set, when it is held, carries the name
  // elasticd gives, belongs to the parent's owner and matches an intent in the database. A
  // user's own job that merely borrows the name is left alone.
  for (const auto& j : sjobs) {
    if (j.state != SlurmJobState::kPending && j.state != SlurmJobState::kRunning) continue;
    std::optional<contract::ExtensionLink> link = contract::ExtensionLink::ParseAdminComment(j.admin_comment);
    const bool linked = link.has_value();
    if (!linked) {
      if (!j.held || !(link = contract::ExtensionLink::ParseJobName(j.name))) continue;
    }
    const auto parent = static_cast<uint32_t>(link->parent);
    const auto group = static_cast<int>(link->group);
    if (!linked) {
      Extension* intent = registry_.FindExtension(parent, group);
      auto owner = registry_.jobs.find(parent);
      if (intent == nullptr || intent->state != ExtState::kSubmitting || owner == registry_.jobs.end() ||
          owner->second.uid != j.user_id) {
        continue;
      }
    }
    Extension* e = registry_.FindExtension(parent, group);
    if (e != nullptr && (e->slurm_job == 0 || e->slurm_job == j.id) && registry_.jobs.count(parent)) {
      if (e->slurm_job == 0) {  // submitted before the crash, not yet recorded
        e->slurm_job = j.id;
        Log(LogLevel::kInfo, kComponent, "adopting extension job ", j.id, " of job ", parent);
      }
      if (e->state == ExtState::kSubmitting) {
        const std::string comment = ExtensionLink(parent, group);
        Status s = j.admin_comment == comment ? Status::Ok() : slurm_->SetAdminComment(j.id, comment);
        if (s.ok() && j.held) s = slurm_->Release(j.id);
        if (s.ok()) e->MoveTo(ExtState::kSubmitted);
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
  for (const auto& [id, e] : registry_.extensions) {
    if (e.state == ExtState::kSubmitting && e.slurm_job == 0) stale.push_back(id);
  }
  for (int64_t id : stale) EndExtension(registry_.extensions.at(id), ExtState::kFailed, "submission interrupted", false);
  // Rescales in flight: a grow whose command was not acknowledged is left to the runtime (it
  // acknowledges by command id, once); the epoch loop ends what Slurm no longer runs.
  Log(LogLevel::kInfo, kComponent, "reconciled with Slurm: ", registry_.jobs.size(), " elastic jobs, ",
      registry_.extensions.size(), " extensions");
}

// One group's part of an acknowledged grow or shrink (a relaunch: its "op"; handlers.cpp, OnAck).
void Controller::FinishGroupCommand(uid_t uid, ElasticJob& job, const std::string& action, int group, bool ok,
                                    const std::string& error, double pause, const Json& phases, double now) {
  Extension* e = registry_.FindExtension(job.id, group);
  records::FinishRescale(*db_, job.id, group, action, ok, pause, phases, now);
  if (action == "grow" && e != nullptr) {
    if (ok && e->MoveTo(ExtState::kJoined)) {
      e->joined_at = now;
      SaveExtension(*e);
      job.rescales++;
      job.last_rescale_at = now;
      SetGpus(job, registry_.CurrentGpus(job));
      Audit(uid, "grown", job.id, {{"group", group}, {"gpus", registry_.CurrentGpus(job)}, {"phases", phases}});
    } else if (!ok) {
      EndExtension(*e, ExtState::kFailed, "grow failed: " + error, true);
    }
  } else if (action == "shrink" && e != nullptr) {
    if (ok) {
      job.rescales++;
      job.last_rescale_at = now;
      EndExtension(*e, ExtState::kLeft, "shrink", true);
      Audit(uid, "shrunk", job.id, {{"group", group}, {"gpus", registry_.CurrentGpus(job)}, {"phases", phases}});
    } else {
      Log(LogLevel::kWarning, kComponent, "job ", job.id, " could not shrink group ", group, ": ",
          error);
      e->MoveTo(ExtState::kJoined);
      e->leaving_at = 0;
      SaveExtension(*e);
    }
  }
}

}  // namespace elastic::controller
