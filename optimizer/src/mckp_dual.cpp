// Minimising the Lagrangian dual of the several-types MCKP (mckp_dual.h).
//
// Why not coordinate descent alone: L is piecewise linear and the types are substitutes (a job
// priced out of one type moves to another), so cyclic coordinate descent zigzags: each exact
// 1-D step undoes part of the others. At 100,000 jobs x 4 types it needed tens of rounds of
// ~60 passes over the items each, and stopped at its time budget 6.6% above the minimum.
// Newton steps on the demand equations D(lambda) = C move all multipliers together; with many
// jobs D is nearly smooth, so a handful of steps reach the minimum to the staircase's width.
#include "mckp_dual.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace elastic::optimizer::mckp_internal {

namespace {

// The problem as the dual sees it: the items job-major for the evaluations of L and D, and on
// the first 1-D minimisation a per-type copy (job-major within the type) of those worth > 0.
class Dual {
 public:
  // Every job, or with stride > 1 every stride-th job against capacities divided by the stride
  // (a sample that prices the types about as the whole does; its L bounds nothing). The items
  // are read in place unless some cannot be chosen (more GPUs than their type has) or a sample
  // is taken; items worth <= 0 need no filter (with lambda >= 0 they never beat pending).
  explicit Dual(const MckpProblem& p, size_t stride = 1) : cap_(p.capacity.size()), by_type_(p.capacity.size()) {
    for (size_t t = 0; t < cap_.size(); ++t) cap_[t] = static_cast<double>(p.capacity[t]) / static_cast<double>(stride);
    bool all_fit = true;
    for (const MckpItem& it : p.items) all_fit = all_fit && it.gpus <= p.capacity[it.type];
    if (stride == 1 && all_fit) {
      items_ = p.items.data();
      job_begin_ = p.job_begin.data();
      jobs_ = p.num_jobs();
    } else {
      const size_t sampled = (p.num_jobs() + stride - 1) / stride;
      own_begin_.reserve(sampled + 1);
      own_begin_.push_back(0);
      for (size_t j = 0; j < p.num_jobs(); j += stride) {
        for (uint32_t i = p.job_begin[j]; i < p.job_begin[j + 1]; ++i) {
          if (p.items[i].gpus <= p.capacity[p.items[i].type]) own_items_.push_back(p.items[i]);
        }
        own_begin_.push_back(static_cast<uint32_t>(own_items_.size()));
      }
      items_ = own_items_.data();
      job_begin_ = own_begin_.data();
      jobs_ = own_begin_.size() - 1;
    }
    for (size_t i = 0; i < job_begin_[jobs_]; ++i) {
      const MckpItem& it = items_[i];
      if (it.value <= 0.0) continue;
      const auto t = static_cast<size_t>(it.type);
      sum_value_[t] += it.value;
      sum_gpus_[t] += static_cast<double>(it.gpus);
      max_eff_[t] = std::max(max_eff_[t], it.value / static_cast<double>(it.gpus));
      ++count_[t];
    }
  }

  Dual(const Dual&) = delete;  // items_ may point into own_items_
  Dual& operator=(const Dual&) = delete;

  size_t types() const noexcept { return cap_.size(); }
  size_t jobs() const noexcept { return jobs_; }
  double capacity(size_t t) const noexcept { return cap_[t]; }
  bool used(size_t t) const noexcept { return count_[t] > 0; }

  // Value per GPU of the type's items, sum of values over sum of GPUs (0 when unused).
  double MeanEfficiency(size_t t) const { return sum_gpus_[t] > 0.0 ? sum_value_[t] / sum_gpus_[t] : 0.0; }
  double MaxEfficiency(size_t t) const { return max_eff_[t]; }
  double MeanGpus(size_t t) const { return count_[t] > 0 ? sum_gpus_[t] / static_cast<double>(count_[t]) : 0.0; }

  // L(lambda); demand[t] = D_t(lambda) (ties: the job's first best item).
  double Eval(const std::vector<double>& lambda, std::vector<double>& demand) const {
    double value = 0.0;
    for (size_t t = 0; t < types(); ++t) {
      value += lambda[t] * cap_[t];
      demand[t] = 0.0;
    }
    const MckpItem* items = items_;
    for (size_t j = 0; j < jobs(); ++j) {
      double best = 0.0;
      int32_t bt = -1, bw = 0;
      for (uint32_t i = job_begin_[j]; i < job_begin_[j + 1]; ++i) {
        const double r = items[i].value - lambda[static_cast<size_t>(items[i].type)] * items[i].gpus;
        if (r > best) {
          best = r;
          bt = items[i].type;
          bw = items[i].gpus;
        }
      }
      value += best;
      if (bt >= 0) demand[static_cast<size_t>(bt)] += bw;
    }
    return value;
  }

  // In one pass: D(lambda) in `demand`, and D(lambda + h_s e_s) in shifted[s * types + t].
  void EvalShifted(const std::vector<double>& lambda, const std::vector<double>& h, std::vector<double>& demand,
                   std::vector<double>& shifted) const {
    const size_t T = types();
    std::fill(demand.begin(), demand.end(), 0.0);
    shifted.assign(T * T, 0.0);
    // Per type: the job's best reduced value and its GPUs, at lambda and at lambda_t + h_t.
    std::vector<double> at(T), at_w(T), up(T), up_w(T);
    constexpr double kNone = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < jobs(); ++j) {
      std::fill(at.begin(), at.end(), kNone);
      std::fill(up.begin(), up.end(), kNone);
      for (uint32_t i = job_begin_[j]; i < job_begin_[j + 1]; ++i) {
        const MckpItem& it = items_[i];
        const auto t = static_cast<size_t>(it.type);
        const auto w = static_cast<double>(it.gpus);
        const double r = it.value - lambda[t] * w;
        if (r > at[t]) {
          at[t] = r;
          at_w[t] = w;
        }
        const double r_up = r - h[t] * w;
        if (r_up > up[t]) {
          up[t] = r_up;
          up_w[t] = w;
        }
      }
      // The best type at lambda, and the best other than each type (ties: lower type index).
      double best = 0.0, second = 0.0;
      size_t bt = T, st = T;
      for (size_t t = 0; t < T; ++t) {
        if (at[t] > best) {
          second = best;
          st = bt;
          best = at[t];
          bt = t;
        } else if (at[t] > second) {
          second = at[t];
          st = t;
        }
      }
      if (bt < T) demand[bt] += at_w[bt];
      for (size_t s = 0; s < T; ++s) {
        // Shifting lambda_s changes only type s's reduced value.
        const double other = s == bt ? second : best;
        const size_t ot = s == bt ? st : bt;
        if (up[s] > other) {
          shifted[s * T + s] += up_w[s];
        } else if (ot < T) {
          shifted[s * T + ot] += at_w[ot];
        }
      }
    }
  }

  // Exact minimisation of L over lambda_t, the others fixed: the derivative C_t - D_t(x) is
  // non-decreasing in x, so bisect for the x where it turns >= 0, on a bracket grown from the
  // current value (the multipliers are near their minimum when this polishes).
  void MinimiseCoordinate(std::vector<double>& lambda, size_t t) {
    BuildByType();
    std::vector<double> outside(jobs(), 0.0);
    for (size_t s = 0; s < types(); ++s) {
      if (s == t) continue;
      for (const TypedItem& it : by_type_[s]) outside[it.job] = std::max(outside[it.job], it.value - lambda[s] * it.gpus);
    }
    std::vector<double> best(jobs(), 0.0), width(jobs(), 0.0);
    auto over = [&](double x) { return Demand(t, x, outside, best, width) > cap_[t]; };
    const double top = MaxEfficiency(t);
    if (!over(0.0)) {
      lambda[t] = 0.0;
      return;
    }
    double lo = 0.0, hi = top;
    const double x0 = std::min(lambda[t], top);
    if (x0 > 0.0) {
      // Grow a bracket around x0 by doubling steps.
      const bool above = over(x0);
      double step = 1e-6 * x0;
      double a = x0;
      for (;;) {
        const double b = above ? a + step : std::max(0.0, a - step);
        if (above ? (b >= top || !over(b)) : (b <= 0.0 || over(b))) {
          lo = above ? a : b;
          hi = above ? std::min(b, top) : a;
          break;
        }
        a = b;
        step *= 4.0;
      }
    }
    for (int iter = 0; iter < 60 && hi - lo > 1e-10 * top; ++iter) {
      const double mid = 0.5 * (lo + hi);
      if (over(mid)) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    lambda[t] = hi;
  }

 private:
  struct TypedItem {
    uint32_t job;
    double gpus;
    double value;
  };

  // GPUs of type t demanded at lambda_t = x, given each job's best value elsewhere.
  double Demand(size_t t, double x, const std::vector<double>& outside, std::vector<double>& best,
                std::vector<double>& width) const {
    const std::vector<TypedItem>& items = by_type_[t];
    for (const TypedItem& it : items) {
      best[it.job] = outside[it.job];
      width[it.job] = 0.0;
    }
    for (const TypedItem& it : items) {
      const double red = it.value - x * it.gpus;
      if (red > best[it.job]) {
        best[it.job] = red;
        width[it.job] = it.gpus;
      }
    }
    double d = 0.0;
    for (const TypedItem& it : items) {
      d += width[it.job];
      width[it.job] = 0.0;  // count each job once
    }
    return d;
  }

  // The per-type copy of the items, built on the first 1-D minimisation (large instances
  // seldom need one).
  void BuildByType() {
    if (by_type_built_) return;
    by_type_built_ = true;
    for (size_t t = 0; t < types(); ++t) by_type_[t].reserve(count_[t]);
    for (size_t j = 0; j < jobs(); ++j) {
      for (uint32_t i = job_begin_[j]; i < job_begin_[j + 1]; ++i) {
        const MckpItem& it = items_[i];
        if (it.value <= 0.0) continue;
        by_type_[static_cast<size_t>(it.type)].push_back({static_cast<uint32_t>(j), static_cast<double>(it.gpus), it.value});
      }
    }
  }

  std::vector<double> cap_;
  std::vector<double> sum_value_ = std::vector<double>(cap_.size(), 0.0);
  std::vector<double> sum_gpus_ = std::vector<double>(cap_.size(), 0.0);
  std::vector<double> max_eff_ = std::vector<double>(cap_.size(), 0.0);
  std::vector<size_t> count_ = std::vector<size_t>(cap_.size(), 0);
  bool by_type_built_ = false;
  const MckpItem* items_ = nullptr;   // job j's items: [job_begin_[j], job_begin_[j + 1])
  const uint32_t* job_begin_ = nullptr;
  size_t jobs_ = 0;
  std::vector<MckpItem> own_items_;  // when the items are not read in place
  std::vector<uint32_t> own_begin_;
  std::vector<std::vector<TypedItem>> by_type_;
};

// Solves a * x = b for the k x k system in place (Gaussian elimination, partial pivoting);
// false when singular.
bool SolveLinear(std::vector<double>& a, std::vector<double>& b, size_t k) {
  for (size_t c = 0; c < k; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < k; ++r) {
      if (std::abs(a[r * k + c]) > std::abs(a[piv * k + c])) piv = r;
    }
    if (!(std::abs(a[piv * k + c]) > 0.0)) return false;
    if (piv != c) {
      for (size_t x = 0; x < k; ++x) std::swap(a[c * k + x], a[piv * k + x]);
      std::swap(b[c], b[piv]);
    }
    for (size_t r = c + 1; r < k; ++r) {
      const double f = a[r * k + c] / a[c * k + c];
      for (size_t x = c; x < k; ++x) a[r * k + x] -= f * a[c * k + x];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = k; c-- > 0;) {
    for (size_t x = c + 1; x < k; ++x) b[c] -= a[c * k + x] * b[x];
    b[c] /= a[c * k + c];
  }
  return true;
}

// sum_t lambda_t C_t: the scale of L's changes (L itself also holds constants, such as the
// keep_running bonus, that no multiplier moves).
double CapacityValue(const Dual& dual, const std::vector<double>& lambda) {
  double v = 0.0;
  for (size_t t = 0; t < dual.types(); ++t) v += lambda[t] * dual.capacity(t);
  return v;
}

// lambda_t = mu * scale_t with mu bisected geometrically until the demand of all types
// together meets their capacity: a rough start (Newton does the rest).
std::vector<double> StartingPoint(const Dual& dual, const std::vector<double>& scale) {
  const size_t T = dual.types();
  double mu_hi = 0.0, total_cap = 0.0;
  for (size_t t = 0; t < T; ++t) {
    if (scale[t] > 0.0) mu_hi = std::max(mu_hi, dual.MaxEfficiency(t) / scale[t]);
    if (dual.used(t)) total_cap += dual.capacity(t);
  }
  double mu_lo = 1e-12 * mu_hi;
  std::vector<double> lambda(T, 0.0), demand(T, 0.0);
  for (int iter = 0; iter < 24; ++iter) {
    const double mu = std::sqrt(mu_lo * mu_hi);
    for (size_t t = 0; t < T; ++t) lambda[t] = mu * scale[t];
    dual.Eval(lambda, demand);
    double total = 0.0;
    for (double d : demand) total += d;
    (total > total_cap ? mu_lo : mu_hi) = mu;
  }
  for (size_t t = 0; t < T; ++t) lambda[t] = mu_hi * scale[t];
  return lambda;
}

// Damped Newton steps on D(lambda) = C from `lambda` (value L(lambda) in `value`) over the
// types whose multiplier is free (lambda_t > 0 or demand above capacity). The Jacobian comes
// from forward differences of width h_t, widened where D is flat at that width (few jobs: a
// coarse staircase), and a step moves no multiplier by more than `radius` times its scale.
// A step is taken only when it lowers L. Counts the steps taken in `steps`; true when the
// last one gained < 1e-7 of sum_t lambda_t C_t: the multipliers are at the staircase's
// resolution. False when no step lowers L (a kink) or at the budget, which is looked at only
// after `min_iterations` iterations.
bool NewtonSteps(Dual& dual, std::vector<double>& lambda, double& value, std::vector<double>& h,
                 const std::vector<double>& scale, int min_iterations, double budget_ms, Clock::time_point start,
                 int& steps) {
  const size_t T = dual.types();
  std::vector<double> demand(T), shifted, jac, rhs, trial(T), trial_demand(T);
  std::vector<size_t> free;
  double radius = 0.5;
  for (int iter = 0; iter < 40 && (iter < min_iterations || MsSince(start) < budget_ms); ++iter) {
    for (int widen = 0;; ++widen) {
      dual.EvalShifted(lambda, h, demand, shifted);
      bool flat = false;
      for (size_t s = 0; s < T; ++s) {
        const double top = 0.05 * std::max(lambda[s], scale[s]);
        // Flat: fewer GPUs moved than a few jobs' worth.
        const double few_jobs = std::min(1e-2 * dual.capacity(s), 8.0 * dual.MeanGpus(s));
        if (dual.used(s) && demand[s] - shifted[s * T + s] < few_jobs && h[s] < top) {
          h[s] = std::min(top, 8.0 * h[s]);
          flat = true;
        }
      }
      if (!flat || widen == 3) break;
    }
    free.clear();
    for (size_t t = 0; t < T; ++t) {
      if (dual.used(t) && (lambda[t] > 0.0 || demand[t] > dual.capacity(t))) free.push_back(t);
    }
    const size_t k = free.size();
    if (k == 0) break;
    jac.assign(k * k, 0.0);
    rhs.assign(k, 0.0);
    for (size_t a = 0; a < k; ++a) {
      const size_t t = free[a];
      rhs[a] = dual.capacity(t) - demand[t];
      for (size_t b = 0; b < k; ++b) {
        const size_t s = free[b];
        jac[a * k + b] = (shifted[s * T + t] - demand[t]) / h[s];
      }
      // D_t falls as lambda_t rises; a column still flat gets a small slope.
      jac[a * k + a] = std::min(jac[a * k + a], -1e-3 * dual.capacity(t) / std::max(lambda[t], scale[t]));
    }
    if (!SolveLinear(jac, rhs, k)) break;
    double longest = 0.0;
    for (size_t a = 0; a < k; ++a) longest = std::max(longest, std::abs(rhs[a]) / std::max(lambda[free[a]], scale[free[a]]));
    double alpha = longest > radius ? radius / longest : 1.0;
    bool accepted = false;
    for (int back = 0; back < 12 && !accepted; ++back, alpha *= 0.5) {
      trial = lambda;
      for (size_t a = 0; a < k; ++a) trial[free[a]] = std::max(0.0, lambda[free[a]] + alpha * rhs[a]);
      const double v = dual.Eval(trial, trial_demand);
      if (v >= value) continue;
      accepted = true;
      const double gain = value - v;
      for (size_t a = 0; a < k; ++a) {
        const size_t t = free[a];
        const double unit = std::max(lambda[t], scale[t]);
        h[t] = std::clamp(0.5 * std::abs(trial[t] - lambda[t]), 1e-7 * unit, 1e-2 * unit);
      }
      radius = back == 0 ? std::min(1.0, 2.0 * radius) : std::max(1e-4, 0.5 * radius);
      lambda = trial;
      value = v;
      ++steps;
      if (gain <= 1e-7 * CapacityValue(dual, lambda)) return true;
    }
    if (!accepted) break;
  }
  return false;
}

}  // namespace

DualSolution MinimiseDual(const MckpProblem& p, double budget_ms, Clock::time_point start) {
  Dual dual(p);
  const size_t T = dual.types();
  DualSolution out;
  std::vector<double> demand(T, 0.0);
  out.lambda.assign(T, 0.0);
  out.bound = dual.Eval(out.lambda, demand);
  auto keep_if_lower = [&](const std::vector<double>& l, double v) {
    if (v < out.bound) {
      out.bound = v;
      out.lambda = l;
    }
  };
  std::vector<double> scale(T, 0.0);
  for (size_t t = 0; t < T; ++t) scale[t] = dual.MeanEfficiency(t);
  std::vector<double> h(T);

  // 1. A start: from the scalar bisection, and on a large instance then Newton steps on a
  //    sample of about kSampleJobs jobs (passes over the whole cost 1 / stride as much).
  //    The first kMinIterations Newton iterations (on the sample, and on the whole) run even
  //    past the budget: bounded work (at most 16 passes over the items each: the differences
  //    and up to 12 halvings; the start's bisection, up to 24 passes) without which the
  //    multipliers of a machine short of CPU could be far from the minimum.
  constexpr size_t kSampleJobs = 8192;
  constexpr int kMinIterations = 4;
  std::vector<double> lambda;
  if (dual.jobs() >= 4 * kSampleJobs) {
    Dual sample(p, dual.jobs() / kSampleJobs);
    lambda = StartingPoint(sample, scale);
    for (size_t t = 0; t < T; ++t) h[t] = 1e-3 * std::max(lambda[t], scale[t]);
    double sample_value = sample.Eval(lambda, demand);
    int sample_steps = 0;
    NewtonSteps(sample, lambda, sample_value, h, scale, kMinIterations, budget_ms, start, sample_steps);
  } else {
    lambda = StartingPoint(dual, scale);
  }
  for (size_t t = 0; t < T; ++t) h[t] = 1e-3 * std::max(lambda[t], scale[t]);
  double value = dual.Eval(lambda, demand);
  keep_if_lower(lambda, value);

  // 2. Newton steps until they converge; where they stall instead (a kink of L), a round of
  //    coordinate descent (exact 1-D steps, kept only when they lower L) and Newton again,
  //    until a cycle gains < 2e-5 of sum_t lambda_t C_t or the budget is spent.
  for (int cycle = 0; cycle < 30 && (cycle == 0 || MsSince(start) < budget_ms); ++cycle) {
    const double before = value;
    const bool converged =
        NewtonSteps(dual, lambda, value, h, scale, cycle == 0 ? kMinIterations : 0, budget_ms, start, out.newton_steps);
    keep_if_lower(lambda, value);
    if (converged) break;
    for (size_t t = 0; t < T && MsSince(start) < budget_ms; ++t) {
      if (!dual.used(t)) continue;
      std::vector<double> next = lambda;
      dual.MinimiseCoordinate(next, t);
      const double v = dual.Eval(next, demand);
      if (v < value) {
        value = v;
        lambda = next;
      }
    }
    keep_if_lower(lambda, value);
    ++out.coordinate_rounds;
    if (before - value <= 2e-5 * CapacityValue(dual, lambda)) break;
  }
  return out;
}

}  // namespace elastic::optimizer::mckp_internal
