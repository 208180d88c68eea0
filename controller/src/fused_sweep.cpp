#include "fused_sweep.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <string>

#include "controller.h"
#include "elastic/common/job_spec.h"
#include "elastic/common/log.h"

namespace elastic::controller {
namespace {

constexpr const char* kComponent = "fuse";

std::optional<uint32_t> Number(std::string_view text) {
  uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::vector<uint32_t>> ParseArrayTasks(std::string_view text) {
  if (auto pct = text.find('%'); pct != std::string_view::npos) text = text.substr(0, pct);
  std::vector<uint32_t> out;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (comma != std::string_view::npos && text.empty()) return std::nullopt;  // a trailing comma
    uint32_t step = 1;
    if (auto colon = part.find(':'); colon != std::string_view::npos) {
      auto s = Number(part.substr(colon + 1));
      if (!s || *s == 0) return std::nullopt;
      step = *s;
      part = part.substr(0, colon);
    }
    auto dash = part.find('-');
    auto lo = Number(part.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : Number(part.substr(dash + 1));
    if (!lo || !hi || *hi < *lo || (*hi - *lo) / step > 1000000) return std::nullopt;
    for (uint64_t t = *lo; t <= *hi; t += step) out.push_back(static_cast<uint32_t>(t));
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::vector<uint32_t> SweepTrials(const std::vector<JobInfo>& jobs, uint32_t array_job) {
  std::set<uint32_t> trials;
  for (const JobInfo& j : jobs) {
    if (j.array_job_id != array_job || j.state == SlurmJobState::kEnded) continue;
    if (j.array_task_id >= 0) {
      trials.insert(static_cast<uint32_t>(j.array_task_id));
    } else if (auto pending = ParseArrayTasks(j.array_tasks_pending)) {
      trials.insert(pending->begin(), pending->end());
    }
  }
  return {trials.begin(), trials.end()};
}

// ---------------------------------------------------------------- the controller's part

ElasticJob* Controller::SweepLeader(uint32_t array_job, uint32_t except) {
  for (auto& [id, job] : registry_.jobs) {
    if (id != except && job.state == "running" && job.fuse.is_object() &&
        job.fuse.value("array_job", 0u) == array_job) {
      return &job;
    }
  }
  return nullptr;
}

std::optional<nlohmann::json> Controller::FusedMemberReply(uint32_t job_id, const Json& msg) {
  if (!contract::JobSpec::FromJson(msg.value("spec", Json::object())).Fused()) return std::nullopt;
  const uint32_t array_job = msg.value("array_job", 0u);
  if (array_job == 0) return std::nullopt;
  ElasticJob* leader = SweepLeader(array_job, job_id);
  if (leader == nullptr) return std::nullopt;
  const uint32_t task = msg.value("array_task", 0u);
  Audit(std::nullopt, "fused_member", job_id, {{"array_job", array_job}, {"task", task}, {"leader", leader->id}});
  Log(LogLevel::kInfo, kComponent, "array task ", array_job, "_", task, " (job ", job_id, ") trains fused in job ",
      leader->id, "; it ends at once");
  return Json{{"mode", "rigid"}, {"fuse", {{"role", "member"}, {"leader", leader->id}}}};
}

nlohmann::json Controller::BecomeSweepLeader(ElasticJob& job, const Json& msg) {
  const uint32_t array_job = msg.value("array_job", 0u);
  const uint32_t task = msg.value("array_task", 0u);
  if (job.fuse.is_object() && job.fuse.value("array_job", 0u) == array_job) {
    // A restarted leader: the same trials, less those already done.
    Json trials = Json::array();
    const Json done = job.fuse.value("done", Json::object());
    for (const auto& t : job.fuse.value("trials", Json::array())) {
      if (!done.contains(std::to_string(t.get<uint32_t>()))) trials.push_back(t);
    }
    return {{"role", "leader"}, {"trials", trials}};
  }
  std::vector<uint32_t> trials{task};
  Json held = Json::array();
  auto jobs = slurm_->LoadJobs();
  if (!jobs.ok()) {
    Log(LogLevel::kWarning, kComponent, "job ", job.id, ": cannot read the array's tasks (", jobs.status().message(),
        "); it trains its own trial only");
  } else {
    trials = SweepTrials(jobs.value(), array_job);
    if (std::find(trials.begin(), trials.end(), task) == trials.end()) trials.insert(trials.begin(), task);
    for (const JobInfo& j : jobs.value()) {
      if (j.array_job_id != array_job || j.state != SlurmJobState::kPending) continue;
      std::vector<uint32_t> pending;
      if (j.array_task_id >= 0) {
        pending.push_back(static_cast<uint32_t>(j.array_task_id));
      } else if (auto p = ParseArrayTasks(j.array_tasks_pending)) {
        pending = *p;
      }
      for (uint32_t t : pending) {
        Status s = slurm_->HoldArrayTask(array_job, t);
        if (s.ok()) {
          held.push_back(t);
        } else {
          Log(LogLevel::kWarning, kComponent, "cannot hold array task ", array_job, "_", t, ": ", s.message());
        }
      }
    }
  }
  job.fuse = {{"array_job", array_job}, {"task", task}, {"trials", trials}, {"held", held}, {"done", Json::object()}};
  Audit(std::nullopt, "fused_leader", job.id, {{"array_job", array_job}, {"trials", trials}, {"held", held}});
  Log(LogLevel::kInfo, kComponent, "job ", job.id, " leads fused sweep ", array_job, ": ", trials.size(),
      " trials, ", held.size(), " tasks held");
  return {{"role", "leader"}, {"trials", trials}};
}

nlohmann::json Controller::OnTrialDone(const Request& r) {
  ElasticJob& job = *r.job;
  if (!job.fuse.is_object()) {
    throw Error(ErrorKind::kInvalidArgument, "job " + std::to_string(job.id) + " does not lead a fused sweep");
  }
  const Json& t = r.msg.contains("trial") ? r.msg["trial"] : Json();
  if (!t.is_number_unsigned()) throw Error(ErrorKind::kProtocol, "trial_done needs \"trial\", an array task index");
  const uint32_t trial = t.get<uint32_t>();
  const Json trials = job.fuse.value("trials", Json::array());
  if (std::find(trials.begin(), trials.end(), Json(trial)) == trials.end()) {
    throw Error(ErrorKind::kInvalidArgument, "task " + std::to_string(trial) + " is not a trial of fused sweep " +
                                                 std::to_string(job.fuse.value("array_job", 0u)));
  }
  const Json& steps_json = r.msg.contains("steps") ? r.msg["steps"] : Json();
  if (!steps_json.is_number_unsigned()) throw Error(ErrorKind::kProtocol, "trial_done needs \"steps\", a count >= 0");
  const int64_t steps = steps_json.get<int64_t>();
  std::string state = r.msg.value("state", std::string("finished"));
  if (state != "finished" && state != "stopped" && state != "diverged") {
    throw Error(ErrorKind::kProtocol, "trial_done: \"state\" is finished, stopped or diverged");
  }
  const Json& result_json = r.msg.contains("result") ? r.msg["result"] : Json("");
  if (!result_json.is_string() || result_json.get<std::string>().size() > 4096) {
    throw Error(ErrorKind::kProtocol, "trial_done: \"result\" is a path of at most 4096 characters");
  }
  const std::string result = result_json.get<std::string>();
  const uint32_t array_job = job.fuse.value("array_job", 0u);
  job.fuse["done"][std::to_string(trial)] = steps;
  SaveJob(job);
  records::RecordTrial(*db_, Now(), array_job, trial, job.id, steps, state, result);
  bool cancelled = false;
  if (trial != job.fuse.value("task", 0u)) {
    Status s = slurm_->CancelArrayTask(array_job, trial);
    cancelled = s.ok();
    if (!s.ok()) Log(LogLevel::kWarning, kComponent, s.message());
  }
  Audit(r.uid, "trial_done", job.id,
        {{"array_job", array_job}, {"task", trial}, {"steps", steps}, {"state", state}, {"result", result}});
  Log(LogLevel::kInfo, kComponent, "sweep ", array_job, ": trial ", trial, " ", state, " after ", steps,
      " steps in job ", job.id, cancelled ? "; its task is ended" : "");
  return {{"recorded", true}, {"task_ended", cancelled}};
}

void Controller::EndSweep(ElasticJob& job) {
  if (!job.fuse.is_object()) return;
  const uint32_t array_job = job.fuse.value("array_job", 0u);
  const Json done = job.fuse.value("done", Json::object());
  for (const auto& t : job.fuse.value("held", Json::array())) {
    const uint32_t task = t.get<uint32_t>();
    if (done.contains(std::to_string(task))) continue;
    Status s = slurm_->ReleaseArrayTask(array_job, task);
    Log(s.ok() ? LogLevel::kInfo : LogLevel::kWarning, kComponent, "sweep ", array_job, ": trial ", task,
        " was not finished by job ", job.id, s.ok() ? "; its task is released to run on its own" : ": " + s.message());
  }
}

}  // namespace elastic::controller
