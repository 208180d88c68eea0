// The `pollux` policy: Pollux-style genetic search on the power-mean objective.
#include "genetic.h"

namespace elastic::optimizer {
namespace {

using internal::Clock;
using internal::Genetic;
using internal::RunPolicy;
using internal::State;

class PolluxPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "pollux"; }
  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    // Pollux optimises the power mean of speedups (p = -1 unless the caller chose a power mean
    // of its own). A job without GPUs counts as Pollux counts it: its speedup is 0, floored at
    // 1e-3 in Pollux's scaled units, where one GPU of a node with G GPUs is worth 1/G. So a
    // pending job costs (1e-3)^-1 = 1000 where a job at its base size costs G: relative to the
    // base (our unit), 1000 / G (250 on 4-GPU nodes), not Sia's 1.1. Running as many jobs as
    // possible thus comes first, which is what keeps Pollux's JCT low under heavy load.
    Objective obj = options.objective;
    if (obj.kind != ObjectiveKind::kPowerMean) {
      obj.kind = ObjectiveKind::kPowerMean;
      obj.p = -1.0;
      obj.pending_penalty = PolluxPendingPenalty(snapshot.cluster);
    }
    return RunPolicy(name(), snapshot, options, obj, [&](State& st, Clock::time_point start) {
      Genetic(st, {100, 100, 0.5, 0.3}, options.seed, options.time_budget_ms, start);
    });
  }
};

}  // namespace

std::unique_ptr<Policy> MakePolluxPolicy() { return std::make_unique<PolluxPolicy>(); }

}  // namespace elastic::optimizer
