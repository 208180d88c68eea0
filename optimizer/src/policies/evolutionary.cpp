// The `evolutionary` policy: ONES-style genetic search on the caller's objective.
#include "genetic.h"

namespace elastic::optimizer {
namespace {

using internal::Clock;
using internal::Genetic;
using internal::RunPolicy;
using internal::State;

class EvolutionaryPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "evolutionary"; }
  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    return RunPolicy(name(), snapshot, options, options.objective, [&](State& st, Clock::time_point start) {
      Genetic(st, {16, 100, 0.5, 0.3}, options.seed, options.time_budget_ms, start);
    });
  }
};

}  // namespace

std::unique_ptr<Policy> MakeEvolutionaryPolicy() { return std::make_unique<EvolutionaryPolicy>(); }

}  // namespace elastic::optimizer
