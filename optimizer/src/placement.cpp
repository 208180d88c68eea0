#include "elastic/optimizer/placement.h"

#include <algorithm>
#include <numeric>

namespace elastic::optimizer {

Status Place(const Cluster& cluster, Plan& plan) {
  for (size_t t = 0; t < cluster.types.size(); ++t) {
    const GpuType& type = cluster.types[t];
    std::vector<size_t> jobs;
    int64_t total = 0;
    for (size_t i = 0; i < plan.assignments.size(); ++i) {
      Assignment& a = plan.assignments[i];
      if (a.pending || a.gpu_type != type.name) continue;
      a.placement.clear();
      jobs.push_back(i);
      total += a.gpus;
    }
    if (total > type.capacity()) {
      return Status(ErrorKind::kInvalidArgument, "placement: plan uses " + std::to_string(total) + " GPUs of type '" +
                                                     type.name + "' which has " + std::to_string(type.capacity()));
    }
    std::stable_sort(jobs.begin(), jobs.end(), [&](size_t a, size_t b) {
      return plan.assignments[a].gpus > plan.assignments[b].gpus;
    });
    std::vector<int> free_gpus(static_cast<size_t>(type.nodes), type.gpus_per_node);
    // Whole free nodes are taken lowest index first; `next_whole` skips nodes already used.
    size_t next_whole = 0;
    for (size_t i : jobs) {
      Assignment& a = plan.assignments[i];
      int need = a.gpus;
      while (need >= type.gpus_per_node) {
        while (next_whole < free_gpus.size() && free_gpus[next_whole] != type.gpus_per_node) ++next_whole;
        if (next_whole == free_gpus.size()) break;
        a.placement.push_back({static_cast<int>(next_whole), type.gpus_per_node});
        free_gpus[next_whole] = 0;
        need -= type.gpus_per_node;
      }
      while (need > 0) {
        // Best fit: the node with the fewest free GPUs that holds the rest, else the fullest-free node.
        int best = -1;
        for (size_t n = 0; n < free_gpus.size(); ++n) {
          if (free_gpus[n] >= need && (best < 0 || free_gpus[n] < free_gpus[static_cast<size_t>(best)])) {
            best = static_cast<int>(n);
          }
        }
        if (best < 0) {
          best = static_cast<int>(std::max_element(free_gpus.begin(), free_gpus.end()) - free_gpus.begin());
        }
        const int take = std::min(need, free_gpus[static_cast<size_t>(best)]);
        a.placement.push_back({best, take});
        free_gpus[static_cast<size_t>(best)] -= take;
        need -= take;
      }
    }
  }
  return Status::Ok();
}

}  // namespace elastic::optimizer
