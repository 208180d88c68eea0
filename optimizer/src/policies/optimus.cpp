// The `optimus` policy (Peng et al., EuroSys 2018): the GPU count only, batch and type frozen at
// the job's request, each next GPU to the job whose remaining time it shortens most.
#include "search.h"

namespace elastic::optimizer {
namespace {

using internal::Clock;
using internal::FifoOrder;
using internal::MarginalGreedy;
using internal::RequestOption;
using internal::RunPolicy;
using internal::State;

class OptimusPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "optimus"; }
  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    // Optimus (Peng et al., EuroSys 2018) gives the next GPU to the job whose remaining time it
    // shortens most: remaining_s * (1 / u(n) - 1 / u(n + 1)) with utilities relative to the base
    // size. That is the marginal value under the power mean p = -1 with weights remaining_s
    // (srpt_exponent -1); jobs without a known remaining time weigh 1 hour.
    Objective obj = options.objective;
    obj.kind = ObjectiveKind::kPowerMean;
    obj.p = -1.0;
    obj.pending_penalty = 1e6;
    obj.srpt_exponent = -1.0;
    obj.rescale_payback = 0.0;
    // Running jobs come first in the first-come-first-served start below, which keeps them
    // running; the keep_running bonus would only blur the gains (and make options worth nothing
    // of their own look usable, from which the one-step climb cannot recover).
    PolicyOptions own = options;
    own.keep_running = false;
    return RunPolicy(name(), snapshot, own, obj, [](State& st, Clock::time_point) {
      // Freeze each job's batch and type at its request; only the GPU count may change.
      for (size_t j = 0; j < st.choice.size(); ++j) {
        const int req = RequestOption(st, j);
        for (size_t k = 0; k < st.usable[j].size(); ++k) {
          if (req < 0) {
            st.usable[j][k] = 0;
            continue;
          }
          const Option& r = st.tab.options[j][static_cast<size_t>(req)];
          const Option& o = st.tab.options[j][k];
          const bool same_batch = o.batch == 0 || r.batch == 0 || o.batch == r.batch;
          if (o.gpu_type != r.gpu_type || !same_batch) st.usable[j][k] = 0;
        }
      }
      // Every job starts at its smallest size (first come first served), then one more
      // step at a time to the job with the largest gain per GPU.
      for (size_t j : FifoOrder(st.snap)) {
        int smallest = -1;
        for (size_t k = 0; k < st.usable[j].size(); ++k) {
          if (st.usable[j][k] && (smallest < 0 || st.Gpus(j, static_cast<int>(k)) < st.Gpus(j, smallest))) {
            smallest = static_cast<int>(k);
          }
        }
        if (smallest >= 0 && st.Fits(j, smallest)) st.Set(j, smallest);
      }
      MarginalGreedy(st, true);
    });
  }
};

}  // namespace

std::unique_ptr<Policy> MakeOptimusPolicy() { return std::make_unique<OptimusPolicy>(); }

}  // namespace elastic::optimizer
