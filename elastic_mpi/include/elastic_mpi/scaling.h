// Learning-rate rules for a changing global batch, and gradient-noise statistics.
//
// The learning rate a program tuned at its base global batch B0 is multiplied by a factor that
// depends on the current global batch B and the rule:
//   none: 1;  linear: B/B0;  sqrt: sqrt(B/B0);
//   adascale: the AdaScale gain r = (var0 + sqr) / (var0 / S + sqr), S = B/B0, var0 = grad_var/B0,
//             which lies in [1, S]; 1 while no gradient statistics are known yet.
//
// Gradient-noise statistics follow Pollux (Qiao et al., OSDI 2021): grad_sqr estimates |g|^2, the
// squared norm of the true gradient; grad_var estimates tr(Sigma), the per-sample gradient
// variance. They come from the per-rank gradients of one step: rank i averages g_i over b_i
// samples, the global gradient G averages over B = sum b_i. With n ranks that have samples:
//   E[sum_i b_i |g_i|^2 / B] = |g|^2 + n tr(Sigma)/B,   E[|G|^2] = |g|^2 + tr(Sigma)/B,
// so  grad_var = B (sum_i b_i |g_i|^2 / B - |G|^2) / (n - 1)  and  grad_sqr = |G|^2 - grad_var/B.
// Both are smoothed with a bias-corrected exponential moving average. The gradient noise scale
// (the batch at which noise and signal are equal) is grad_var / grad_sqr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "elastic/common/error.h"

namespace elastic::mpi {

enum class LrRule { kNone, kLinear, kSqrt, kAdaScale };

// "none", "linear", "sqrt", "adascale".
std::string_view LrRuleName(LrRule rule) noexcept;
// Parses the names above; kInvalidArgument with the accepted names otherwise.
Result<LrRule> ParseLrRule(std::string_view name);

// Smoothed gradient-noise statistics. Not thread-safe; one per session.
class GradientNoise {
 public:
  // smoothing in [0, 1): weight of the history in the moving average (0 = last step only).
  explicit GradientNoise(double smoothing = 0.9);

  // One step's observation: weighted_local_sqr = sum_i b_i |g_i|^2 over the ranks, global_sqr =
  // |G|^2, global_batch = B = sum_i b_i, ranks = n (ranks with b_i > 0). Steps with n < 2 carry
  // no noise information and are ignored (returns false). Negative raw estimates are kept (they
  // average out); the smoothed grad_var and grad_sqr are clamped at 0 when read.
  bool Observe(double weighted_local_sqr, double global_sqr, double global_batch, int ranks);

  bool valid() const noexcept { return steps_ > 0; }
  double grad_sqr() const noexcept;  // |g|^2 estimate (>= 0); 0 before the first observation
  double grad_var() const noexcept;  // tr(Sigma) estimate (>= 0); 0 before the first observation
  // grad_var / grad_sqr; nullopt while invalid or grad_sqr == 0.
  std::optional<double> noise_scale() const noexcept;

  // Raw smoothed moments (for state hand-over); Restore() puts them back.
  struct Moments {
    double sqr = 0;
    double var = 0;
    double steps = 0;
  };
  Moments moments() const noexcept { return {sqr_ema_, var_ema_, static_cast<double>(steps_)}; }
  void Restore(const Moments& m) noexcept;

 private:
  double smoothing_;
  double sqr_ema_ = 0;
  double var_ema_ = 0;
  std::uint64_t steps_ = 0;
};

// The learning-rate factor of rule at global batch B with base batch B0 (both > 0).
// For kAdaScale, noise supplies the statistics; an invalid noise gives 1.
double LrFactor(LrRule rule, double global_batch, double base_batch, const GradientNoise& noise);

}  // namespace elastic::mpi
