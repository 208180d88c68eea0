// The step time a metrics report to elasticd carries (internal header): the median of the steps
// since the last report, without the first step of each world.
// - The first step of a world pays for what later steps do not: communicators connected on
//   first use (Open MPI's TCP and shared-memory transports, NCCL's set-up), memory pools
//   filled, a relaunched world's first collective among ranks still starting.
// - A rare stall is not the size's speed either: on this machine, 6 ranks of a job that steps in
//   0.046 s stalled 1.03 s and 2.10 s once each in 35 steps (a neighbour's burst on shared
//   cores); their mean, 0.13 s (0.25 s with the world's first step), made the job look slower
//   at 6 GPUs than at 2 (0.128 s), and elasticd shrank it again by that measure. The median is
//   what a step at that size takes.
// The trade-off: a cost that hits fewer than half the steps (an evaluation every N steps) is
// not in it either. elasticd checks what a report claims against the job's progress on its own
// clock (docs/interfaces.md section 3): a claim of more than twice that throughput is clamped.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <vector>

namespace elastic::mpi {

class StepWindow {
 public:
  using Clock = std::chrono::steady_clock;

  // One finished step of `seconds` at `now`. The first of its world is not counted (the window
  // opens then), nor is a value that is no time (not finite, not positive: a program that does
  // not time its steps).
  void Step(double seconds, Clock::time_point now) {
    if (!warm_) {
      warm_ = true;
      opened_ = now;
      return;
    }
    if (!std::isfinite(seconds) || seconds <= 0) return;
    if (steps_.size() >= kMaxSteps) steps_.erase(steps_.begin(), steps_.begin() + kMaxSteps / 2);  // the latest
    steps_.push_back(seconds);
  }
  // Whether a report is due: `interval_s` since the window opened (the world's first step, or
  // the last report).
  bool Due(Clock::time_point now, double interval_s) const {
    return warm_ && std::chrono::duration<double>(now - opened_).count() >= interval_s;
  }
  // After a report at `now`: the next window starts empty.
  void Reported(Clock::time_point now) {
    steps_.clear();
    opened_ = now;
  }
  // After a change of the world (join, shrink, relaunch, batch): a new size, a new first step,
  // and nothing of the old size mixed in.
  void NewWorld() {
    steps_.clear();
    warm_ = false;
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

 private:
  // A window longer than this (5 s of steps of 0.6 ms or less) keeps its latest 4096-8192 steps.
  static constexpr std::size_t kMaxSteps = 8192;
  std::vector<double> steps_;
  bool warm_ = false;
  Clock::time_point opened_{};
};

}  // namespace elastic::mpi
