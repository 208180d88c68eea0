#include "search.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <queue>

namespace elastic::optimizer::internal {
namespace {

// Best upgrade of job j that fits: value gained per extra GPU (an upgrade that saves GPUs
// and gains value ranks first). `next_only`: only the next larger option of the same type.
struct Upgrade {
  double score = -1.0;
  int option = -1;
};

Upgrade BestUpgrade(const State& st, size_t j, bool next_only) {
  Upgrade best;
  const int cur = st.choice[j];
  const double v0 = st.Value(j, cur);
  const int w0 = st.Gpus(j, cur);
  int next_gpus = std::numeric_limits<int>::max();
  for (size_t kk = 0; kk < st.tab.options[j].size(); ++kk) {
    const int k = static_cast<int>(kk);
    if (!st.usable[j][kk] || k == cur) continue;
    if (cur >= 0 && st.Type(j, k) != st.Type(j, cur)) continue;  // no type changes once placed
    if (next_only && cur >= 0) {
      const int w = st.Gpus(j, k);
      if (w <= w0 || w > next_gpus) continue;
      if (w < next_gpus) {
        next_gpus = w;
        best = {};
      }
    }
    const double dv = st.Value(j, k) - v0;
    if (dv <= 0.0 || !st.Fits(j, k)) continue;
    const int dw = st.Gpus(j, k) - w0;
    const double score = dw <= 0 ? std::numeric_limits<double>::max() : dv / dw;
    if (score > best.score) best = {score, k};
  }
  return best;
}

}  // namespace

void MarginalGreedy(State& st, bool next_only) {
  using Entry = std::pair<double, size_t>;
  std::priority_queue<Entry> heap;
  for (size_t j = 0; j < st.choice.size(); ++j) {
    const Upgrade u = BestUpgrade(st, j, next_only);
    if (u.option >= 0) heap.emplace(u.score, j);
  }
  while (!heap.empty()) {
    const auto [score, j] = heap.top();
    heap.pop();
    const Upgrade u = BestUpgrade(st, j, next_only);
    if (u.option < 0) continue;
    if (u.score < score) {  // stale: re-queue with the current score
      heap.emplace(u.score, j);
      continue;
    }
    st.Set(j, u.option);
    const Upgrade next = BestUpgrade(st, j, next_only);
    if (next.option >= 0) heap.emplace(next.score, j);
  }
}

// The job's "request": its current configuration when running, else its smallest option on
// its first usable type. -1 when it has no usable option.
int RequestOption(const State& st, size_t j) {
  const Job& job = st.snap.jobs[j];
  const auto& opts = st.tab.options[j];
  int best = -1;
  for (size_t k = 0; k < opts.size(); ++k) {
    if (job.current && opts[k].gpu_type == job.current->gpu_type && opts[k].gpus == job.current->gpus &&
        (opts[k].batch == 0 || opts[k].batch == job.current->batch)) {
      return static_cast<int>(k);
    }
  }
  for (size_t k = 0; k < opts.size(); ++k) {
    if (best < 0 || (opts[k].gpu_type == opts[static_cast<size_t>(best)].gpu_type &&
                     opts[k].gpus < opts[static_cast<size_t>(best)].gpus)) {
      best = static_cast<int>(k);
    }
  }
  return best;
}

// Jobs in first-come order: running jobs first, then the oldest.
std::vector<size_t> FifoOrder(const Snapshot& s) {
  std::vector<size_t> order(s.jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const bool ra = s.jobs[a].state == JobState::kRunning;
    const bool rb = s.jobs[b].state == JobState::kRunning;
    if (ra != rb) return ra;
    return s.jobs[a].age_s > s.jobs[b].age_s;
  });
  return order;
}

}  // namespace elastic::optimizer::internal
