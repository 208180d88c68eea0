// The `dp` policy: the epoch problem as a multiple-choice knapsack (mckp.h).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "elastic/optimizer/mckp.h"
#include "elastic/optimizer/policy.h"
#include "../internal.h"

namespace elastic::optimizer {
namespace {

class DpPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "dp"; }

  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    const auto start = std::chrono::steady_clock::now();
    Result<internal::Tables> tables = internal::PrepareTables(snapshot, options.objective, options.keep_running);
    if (!tables.ok()) return tables.status();
    const MckpProblem problem = internal::ToMckp(snapshot, tables.value());
    MckpSettings settings;
    settings.time_budget_ms = std::max(1.0, options.time_budget_ms - internal::MsSince(start));
    const MckpSolution sol = SolveMckp(problem, settings);
    std::vector<int> choice(sol.choice.begin(), sol.choice.end());
    Plan plan = internal::MakePlan(snapshot, tables.value(), choice, "dp");
    plan.method = sol.method;
    plan.exact = sol.exact;
    // The MCKP's values include the keep_running bonus of the chosen jobs: remove it from the
    // bound too (valid for every plan that keeps as many running jobs as this one).
    double bonus = 0.0;
    for (size_t j = 0; j < choice.size(); ++j) {
      if (choice[j] >= 0) bonus += tables.value().bonus[j];
    }
    plan.bound = sol.exact ? plan.objective : sol.bound - bonus;
    // The LP-based methods may still find the optimum: say so when the bound proves it.
    if (!plan.exact && plan.bound - plan.objective <= 1e-12 * std::max(1.0, std::abs(plan.bound))) plan.exact = true;
    if (Status st = internal::Finish(snapshot, options, start, plan); !st.ok()) return st;
    return plan;
  }
};

}  // namespace

std::unique_ptr<Policy> MakeDpPolicy() { return std::make_unique<DpPolicy>(); }

}  // namespace elastic::optimizer
