#include "node_fill.h"

#include <algorithm>
#include <limits>

namespace elastic::simulator {

void ShrinkOnNodes(std::vector<int>& alloc, int have, int want) {
  while (have > want) {
    size_t pick = 0;
    int least = std::numeric_limits<int>::max();
    for (size_t n = 0; n < alloc.size(); ++n) {
      if (alloc[n] > 0 && alloc[n] <= least) {
        least = alloc[n];
        pick = n;
      }
    }
    --alloc[pick];
    --have;
  }
}

void GrowOnNodes(std::vector<int>& alloc, std::vector<int>& free_gpus, int need, int gpus_per_node) {
  for (size_t n = 0; n < alloc.size() && need > 0; ++n) {
    if (alloc[n] > 0) {
      const int take = std::min(need, free_gpus[n]);
      alloc[n] += take;
      free_gpus[n] -= take;
      need -= take;
    }
  }
  for (size_t n = 0; n < free_gpus.size() && need >= gpus_per_node; ++n) {
    if (free_gpus[n] == gpus_per_node) {
      alloc[n] += gpus_per_node;
      free_gpus[n] = 0;
      need -= gpus_per_node;
    }
  }
  while (need > 0) {
    int best = -1;
    for (size_t n = 0; n < free_gpus.size(); ++n) {
      if (free_gpus[n] >= need && (best < 0 || free_gpus[n] < free_gpus[static_cast<size_t>(best)])) {
        best = static_cast<int>(n);
      }
    }
    if (best < 0) best = static_cast<int>(std::max_element(free_gpus.begin(), free_gpus.end()) - free_gpus.begin());
    const auto b = static_cast<size_t>(best);
    const int take = std::min(need, free_gpus[b]);
    if (take <= 0) break;  // cannot happen: a plan fits its capacity
    alloc[b] += take;
    free_gpus[b] -= take;
    need -= take;
  }
}

}  // namespace elastic::simulator
