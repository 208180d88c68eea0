// The step time a metrics report to elasticd carries (internal header): the median of the steps
// since the last report, without the first step of each world.
// - The first step of a world pays for what later steps do not: communicators connected on
//   first use (Open MPI's TCP and shared-memory transports, NCCL's set-up), memory pools
//   filled, a relaunched world's first collective among ranks still starting.
// - A rare stall is not the size's speed either: on this machine, 6 ranks of a job that steps in
//   0.046 s stalled 1.03 s and 2.10 s once each in 35 steps (a neighbour's burst on shared
//   cores); their mean, 0.25 s, made the job look slower at 6 GPUs than at 2, and elasticd
//   shrank it again by that measure. The median is what a step at that size takes.
// elasticd still checks what a report claims against the job's progress on its own clock
// (docs/interfaces.md section 3), so steady slowness is not hidden by this choice.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace elastic::mpi {

class StepWindow {
 public:
  // One finished step of `seconds`; false when it is the first of its world (not counted).
  bool Add(double seconds) {
    if (!warm_) {
      warm_ = true;
      return false;
    }
    if (steps_.size() >= kMaxSteps) steps_.erase(steps_.begin(), steps_.begin() + kMaxSteps / 2);  // the latest
    steps_.push_back(seconds);
    return true;
  }
  std::size_t count() const { return steps_.size(); }
  // The median of the counted steps (of an even count, the mean of the middle two); 0 if none.
  double median() const {
    if (steps_.empty()) return 0.0;
    std::vector<double> s = steps_;
    const std::size_t mid = s.size() / 2;
    std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(mid), s.end());
    const double upper = s[mid];
    if (s.size() % 2 == 1) return upper;
    const double lower = *std::max_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(mid));
    return (lower + upper) / 2;
  }
  // After a report: the next window starts empty.
  void Clear() { steps_.clear(); }
  // After a change of the world (join, shrink, relaunch): a new size, a new first step, and
  // nothing of the old size mixed in.
  void NewWorld() {
    Clear();
    warm_ = false;
  }

 private:
  // Steps of 0.1 ms (the shortest elasticd accepts) for 5 s: a window keeps its latest 8192.
  static constexpr std::size_t kMaxSteps = 8192;
  std::vector<double> steps_;
  bool warm_ = false;
};

}  // namespace elastic::mpi
