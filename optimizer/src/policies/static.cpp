// The `static` policy: no elasticity; the user's request, first come first served.
#include "search.h"

namespace elastic::optimizer {
namespace {

using internal::Clock;
using internal::FifoOrder;
using internal::RequestOption;
using internal::RunPolicy;
using internal::State;

class StaticPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "static"; }
  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    return RunPolicy(name(), snapshot, options, options.objective, [](State& st, Clock::time_point) {
      for (size_t j : FifoOrder(st.snap)) {
        const int req = RequestOption(st, j);
        if (req >= 0 && st.Fits(j, req)) st.Set(j, req);
      }
    });
  }
};

}  // namespace

std::unique_ptr<Policy> MakeStaticPolicy() { return std::make_unique<StaticPolicy>(); }

}  // namespace elastic::optimizer
