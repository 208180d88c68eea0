// The `dp` policy: the epoch problem as a multiple-choice knapsack (mckp.h).
#include <chrono>

#include "elastic/optimizer/mckp.h"
#include "elastic/optimizer/policy.h"
#include "internal.h"

namespace elastic::optimizer {
namespace {

class DpPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "dp"; }

  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    const auto start = std::chrono::steady_clock::now();
    Result<internal::Tables> tables = internal::PrepareTables(snapshot, options.objective);
    if (!tables.ok()) return tables.status();
    const MckpProblem problem = internal::ToMckp(snapshot, tables.value());
    MckpSettings settings;
    settings.time_budget_ms = std::max(1.0, options.time_budget_ms - internal::MsSince(start));
    const MckpSolution sol = SolveMckp(problem, settings);
    std::vector<int> choice(sol.choice.begin(), sol.choice.end());
    Plan plan = internal::MakePlan(snapshot, tables.value(), choice, "dp");
    plan.method = sol.method;
    plan.exact = sol.exact;
    plan.bound = sol.exact ? plan.objective : sol.bound;
    if (Status st = internal::Finish(snapshot, options, start, plan); !st.ok()) return st;
    return plan;
  }
};

}  // namespace

std::unique_ptr<Policy> MakeDpPolicy() { return std::make_unique<DpPolicy>(); }

}  // namespace elastic::optimizer
