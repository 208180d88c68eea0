#include "test_util.h"

#include <cmath>
#include <functional>

namespace elastic::optimizer::testing {

MckpProblem RandomMckp(std::mt19937_64& rng, int jobs, int max_items, int types, int max_gpus, int64_t capacity) {
  MckpProblem p;
  p.capacity.assign(static_cast<size_t>(types), capacity);
  std::uniform_int_distribution<int> items(1, max_items), gpus(1, max_gpus), type(0, types - 1);
  std::uniform_real_distribution<double> value(-0.2, 10.0);
  for (int j = 0; j < jobs; ++j) {
    std::vector<MckpItem> row;
    const int k = items(rng);
    for (int i = 0; i < k; ++i) row.push_back({type(rng), gpus(rng), value(rng)});
    p.AddJob(row);
  }
  return p;
}

double BruteForce(const MckpProblem& p) {
  std::vector<int64_t> used(p.capacity.size(), 0);
  double best = 0.0;
  std::function<void(size_t, double)> rec = [&](size_t j, double v) {
    if (j == p.num_jobs()) {
      best = std::max(best, v);
      return;
    }
    rec(j + 1, v);
    for (uint32_t i = p.job_begin[j]; i < p.job_begin[j + 1]; ++i) {
      const MckpItem& it = p.items[i];
      if (used[it.type] + it.gpus > p.capacity[it.type]) continue;
      used[it.type] += it.gpus;
      rec(j + 1, v + it.value);
      used[it.type] -= it.gpus;
    }
  };
  rec(0, 0.0);
  return best;
}

std::string CheckChoice(const MckpProblem& p, const std::vector<int32_t>& choice, double objective) {
  if (choice.size() != p.num_jobs()) return "choice has the wrong size";
  std::vector<int64_t> used(p.capacity.size(), 0);
  double v = 0.0;
  for (size_t j = 0; j < choice.size(); ++j) {
    if (choice[j] < 0) continue;
    const uint32_t idx = p.job_begin[j] + static_cast<uint32_t>(choice[j]);
    if (idx >= p.job_begin[j + 1]) return "job " + std::to_string(j) + " picks a non-existent item";
    used[p.items[idx].type] += p.items[idx].gpus;
    v += p.items[idx].value;
  }
  for (size_t t = 0; t < used.size(); ++t) {
    if (used[t] > p.capacity[t]) {
      return "type " + std::to_string(t) + " uses " + std::to_string(used[t]) + " > " + std::to_string(p.capacity[t]);
    }
  }
  if (std::abs(v - objective) > 1e-7 * std::max(1.0, std::abs(v))) {
    return "objective " + std::to_string(objective) + " but the choice is worth " + std::to_string(v);
  }
  return "";
}

}  // namespace elastic::optimizer::testing
