#include "elastic/report/sweeps.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

namespace elastic::report {
namespace {

// The task index of an array task's id as sacct shows it ("12_3" of array 12 -> 3).
std::optional<uint32_t> TaskOf(const std::string& job_id, uint64_t array_job) {
  const std::string prefix = std::to_string(array_job) + "_";
  if (job_id.rfind(prefix, 0) != 0) return std::nullopt;
  uint32_t task = 0;
  const char* b = job_id.data() + prefix.size();
  const char* e = job_id.data() + job_id.size();
  auto [ptr, ec] = std::from_chars(b, e, task);
  if (ec != std::errc() || ptr != e || b == e) return std::nullopt;
  return task;
}

}  // namespace

std::vector<SweepUsage> SplitSweeps(const std::vector<JobUsage>& jobs, const Journal& journal) {
  std::map<uint64_t, SweepUsage> sweeps;
  for (const JournalTrial& t : journal.trials) {
    SweepUsage& s = sweeps[t.array_job];
    s.array_job = t.array_job;
    s.leader = t.leader;
    TrialUsage& u = s.trials.emplace_back();
    u.task = t.task;
    u.job_id = std::to_string(t.array_job) + "_" + std::to_string(t.task);
    u.steps = t.steps;
    u.state = t.state;
    u.result = t.result;
  }
  std::vector<SweepUsage> out;
  for (auto& [array_job, s] : sweeps) {
    const JobUsage* leader = nullptr;
    for (const JobUsage& j : jobs) {
      if (j.id == s.leader) leader = &j;
    }
    if (leader == nullptr) continue;  // the leader ran outside the period
    s.account = leader->account;
    s.user = leader->user;
    s.leader_gpu_s = leader->base_gpu_s + leader->extension_gpu_s;
    s.array_gpu_s = s.leader_gpu_s;
    std::map<uint32_t, size_t> index;
    for (size_t i = 0; i < s.trials.size(); ++i) index[s.trials[i].task] = i;
    // The array's other tasks: their own allocations, and a row for those the leader did not report.
    for (const JobUsage& j : jobs) {
      if (j.id == s.leader) continue;
      auto task = TaskOf(j.job_id, array_job);
      if (!task) continue;
      if (!index.count(*task)) {
        index[*task] = s.trials.size();
        TrialUsage& u = s.trials.emplace_back();
        u.task = *task;
        u.job_id = j.job_id;
      }
      const double gpu_s = j.base_gpu_s + j.extension_gpu_s;
      s.trials[index[*task]].own_gpu_s += gpu_s;
      s.array_gpu_s += gpu_s;
    }
    int64_t steps = 0;
    size_t reported = 0;
    for (const TrialUsage& u : s.trials) {
      steps += u.steps;
      if (!u.state.empty()) ++reported;
    }
    for (TrialUsage& u : s.trials) {
      if (steps > 0) {
        u.fused_gpu_s = s.leader_gpu_s * static_cast<double>(u.steps) / static_cast<double>(steps);
      } else if (!u.state.empty()) {
        u.fused_gpu_s = s.leader_gpu_s / static_cast<double>(reported);
      }
    }
    std::sort(s.trials.begin(), s.trials.end(), [](const TrialUsage& a, const TrialUsage& b) { return a.task < b.task; });
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace elastic::report
