// The `greedy` policy: repeatedly the upgrade with the most value gained per extra GPU.
#include "search.h"

namespace elastic::optimizer {
namespace {

using internal::Clock;
using internal::MarginalGreedy;
using internal::RunPolicy;
using internal::State;

class GreedyPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "greedy"; }
  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    return RunPolicy(name(), snapshot, options, options.objective,
                     [](State& st, Clock::time_point) { MarginalGreedy(st, false); });
  }
};

}  // namespace

std::unique_ptr<Policy> MakeGreedyPolicy() { return std::make_unique<GreedyPolicy>(); }

}  // namespace elastic::optimizer
