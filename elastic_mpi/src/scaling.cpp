#include "elastic_mpi/scaling.h"

#include <algorithm>
#include <cmath>

namespace elastic::mpi {

std::string_view LrRuleName(LrRule rule) noexcept {
  switch (rule) {
    case LrRule::kNone: return "none";
    case LrRule::kLinear: return "linear";
    case LrRule::kSqrt: return "sqrt";
    case LrRule::kAdaScale: return "adascale";
  }
  return "none";
}

Result<LrRule> ParseLrRule(std::string_view name) {
  for (LrRule r : {LrRule::kNone, LrRule::kLinear, LrRule::kSqrt, LrRule::kAdaScale}) {
    if (LrRuleName(r) == name) return r;
  }
  return Status(ErrorKind::kInvalidArgument,
                "unknown learning-rate rule '" + std::string(name) +
                    "' (expected none, linear, sqrt or adascale)");
}

GradientNoise::GradientNoise(double smoothing) : smoothing_(smoothing) {
  if (!(smoothing >= 0.0 && smoothing < 1.0)) {
    throw Error(ErrorKind::kInvalidArgument,
                "gradient-noise smoothing must be in [0, 1), got " + std::to_string(smoothing));
  }
}

bool GradientNoise::Observe(double weighted_local_sqr, double global_sqr, double global_batch,
                            int ranks) {
  if (ranks < 2 || !(global_batch > 0)) return false;
  const double n = ranks;
  const double var = global_batch * (weighted_local_sqr / global_batch - global_sqr) / (n - 1.0);
  const double sqr = global_sqr - var / global_batch;
  sqr_ema_ = smoothing_ * sqr_ema_ + (1.0 - smoothing_) * sqr;
  var_ema_ = smoothing_ * var_ema_ + (1.0 - smoothing_) * var;
  ++steps_;
  return true;
}

namespace {
double Debias(double ema, double smoothing, std::uint64_t steps) {
  if (steps == 0) return 0.0;
  const double correction = 1.0 - std::pow(smoothing, static_cast<double>(steps));
  return correction > 0 ? ema / correction : ema;
}
}  // namespace

double GradientNoise::grad_sqr() const noexcept {
  return std::max(0.0, Debias(sqr_ema_, smoothing_, steps_));
}
double GradientNoise::grad_var() const noexcept {
  return std::max(0.0, Debias(var_ema_, smoothing_, steps_));
}

std::optional<double> GradientNoise::noise_scale() const noexcept {
  if (!valid() || grad_sqr() <= 0) return std::nullopt;
  return grad_var() / grad_sqr();
}

void GradientNoise::Restore(const Moments& m) noexcept {
  sqr_ema_ = m.sqr;
  var_ema_ = m.var;
  steps_ = m.steps > 0 ? static_cast<std::uint64_t>(m.steps) : 0;
}

double LrFactor(LrRule rule, double global_batch, double base_batch, const GradientNoise& noise) {
  if (!(global_batch > 0) || !(base_batch > 0)) {
    throw Error(ErrorKind::kInvalidArgument, "LrFactor: batches must be positive");
  }
  const double scale = global_batch / base_batch;
  switch (rule) {
    case LrRule::kNone: return 1.0;
    case LrRule::kLinear: return scale;
    case LrRule::kSqrt: return std::sqrt(scale);
    case LrRule::kAdaScale: {
      if (!noise.valid()) return 1.0;
      const double var0 = noise.grad_var() / base_batch;
      const double sqr = noise.grad_sqr();
      if (var0 + sqr <= 0) return 1.0;
      return (var0 + sqr) / (var0 / scale + sqr);
    }
  }
  return 1.0;
}

}  // namespace elastic::mpi
