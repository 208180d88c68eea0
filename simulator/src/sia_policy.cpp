#include "sia_policy.h"

#include <algorithm>
#include <cmath>

#include "exact_mckp.h"

namespace elastic::simulator::sia {

double ReallocFactor(double age_s, int restarts, double cost_s) {
  if (age_s < cost_s) return 1.0;
  return std::max(0.0, age_s - restarts * cost_s) / (age_s + cost_s);
}

Result<Solution> Solve(const std::vector<JobInput>& jobs, const std::vector<int64_t>& capacity, const Params& params) {
  namespace opt = elastic::optimizer;
  // Sia minimises sum_j sum_c x_jc A_jc + lambda_n * (jobs without a configuration), A =
  // round(u^p, 2) (clipped): the same as maximising sum_j sum_c x_jc (lambda_n - A_jc), a
  // multiple-choice knapsack with one capacity per GPU type.
  opt::MckpProblem problem;
  problem.capacity = capacity;
  std::vector<std::vector<int>> index(jobs.size());  // MCKP item -> configuration
  // A pinned job's one item outweighs every other job's together (Sia makes it a constraint).
  double pin_bonus = 1.0;
  for (const JobInput& j : jobs) pin_bonus += params.lambda_n * static_cast<double>(j.configs.empty() ? 0 : 1);
  for (size_t j = 0; j < jobs.size(); ++j) {
    std::vector<opt::MckpItem> items;
    const bool pinned = jobs[j].pinned && jobs[j].current >= 0;
    for (size_t c = 0; c < jobs[j].configs.size(); ++c) {
      if (pinned && static_cast<int>(c) != jobs[j].current) continue;
      const Config& cf = jobs[j].configs[c];
      double u = cf.goodput;
      if (jobs[j].current >= 0 && static_cast<int>(c) != jobs[j].current) u *= cf.realloc;
      double a = u > 0.0 ? std::round(std::pow(u, params.p) * 100.0) / 100.0 : params.clip;
      a = std::min(a, params.clip);
      const double value = params.lambda_n - a + (pinned ? pin_bonus : 0.0);
      if (!(value > 0.0)) continue;
      items.push_back({cf.type, cf.gpus, value});
      index[j].push_back(static_cast<int>(c));
    }
    problem.AddJob(items);
  }
  Result<ExactMckp> e = SolveMckpExactly(problem, params.time_budget_ms);
  if (!e.ok()) return Status(e.status().kind(), "sia: " + e.status().message());
  Solution out;
  out.objective = e.value().objective;
  out.by_cbc = e.value().by_cbc;
  out.proven = e.value().proven;
  out.cbc_error = e.value().cbc_error;
  const std::vector<int32_t>& chosen = e.value().choice;
  out.choice.assign(jobs.size(), -1);
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (chosen[j] >= 0) out.choice[j] = index[j][static_cast<size_t>(chosen[j])];
  }
  return out;
}

}  // namespace elastic::simulator::sia
