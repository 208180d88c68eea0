// The rule that groups a workload's one-GPU jobs into sweeps (sweeps.h).
#include "elastic/simulator/sweeps.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <utility>

namespace elastic::simulator {

std::vector<int> GroupSweeps(const std::vector<JobSpec>& jobs, const SweepRule& rule) {
  // Jobs in arrival order (stable: equal arrivals keep the workload's order).
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return jobs[a].arrival_s < jobs[b].arrival_s; });
  std::vector<std::vector<size_t>> groups;
  std::map<std::pair<std::string, std::string>, size_t> open;  // (user, app) -> its open group
  for (size_t i : order) {
    const JobSpec& j = jobs[i];
    if (j.req_gpus != 1 || j.user.empty()) continue;
    const auto key = std::make_pair(j.user, j.app);
    auto it = open.find(key);
    if (it == open.end() || j.arrival_s - jobs[groups[it->second].front()].arrival_s > rule.window_s) {
      groups.emplace_back();
      it = open.insert_or_assign(key, groups.size() - 1).first;
    }
    groups[it->second].push_back(i);
  }
  std::vector<int> sweep(jobs.size(), -1);
  int next = 0;
  for (const std::vector<size_t>& g : groups) {
    if (g.size() < 2) continue;
    for (size_t i : g) sweep[i] = next;
    ++next;
  }
  return sweep;
}

}  // namespace elastic::simulator
