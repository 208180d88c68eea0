#include "elastic/optimizer/goodput.h"

#include <nlopt.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

namespace elastic::optimizer {

double PolluxStepTime(const PolluxParams& p, int nodes, int replicas, double local_batch, int accum_steps) {
  const double compute = p.alpha_c + p.beta_c * local_batch;
  double sync = 0.0;
  if (replicas > 1) {
    const double extra = std::max(replicas - 2, 0);
    sync = nodes > 1 ? p.alpha_n + p.beta_n * extra : p.alpha_r + p.beta_r * extra;
  }
  const double g = p.gamma;
  const double step = sync > 0.0 ? std::pow(std::pow(compute, g) + std::pow(sync, g), 1.0 / g) : compute;
  return step + accum_steps * compute;
}

namespace {

// Parameter vector layout used by the fit.
enum Param { kAlphaC, kBetaC, kAlphaN, kBetaN, kAlphaR, kBetaR, kGamma, kNumParams };

// The samples as the fit sees them: one point per distinct (nodes, GPUs, local batch), weighted by
// its number of samples, at the mean of their log step times. The squared log error of the
// samples is that of the points plus a constant (each point's spread about its mean), so the
// minimiser is the same, and a loss costs one evaluation per configuration instead of one per
// sample (a job's window of samples repeats a few configurations). Points keep the order of
// their first sample: without repeats the loss is the per-sample sum, term for term.
struct FitPoint {
  int nodes = 1;
  int gpus = 1;
  double local_batch = 1.0;
  double weight = 0.0;    // samples at this configuration
  double log_time = 0.0;  // their mean log step time
};

std::vector<FitPoint> FitPoints(const std::vector<StepSample>& samples) {
  std::vector<FitPoint> points;
  std::map<std::tuple<int, int, double>, size_t> index;
  for (const StepSample& s : samples) {
    auto [it, added] = index.try_emplace({s.nodes, s.gpus, s.local_batch}, points.size());
    if (added) points.push_back({s.nodes, s.gpus, s.local_batch, 0.0, 0.0});
    FitPoint& p = points[it->second];
    p.weight += 1.0;
    p.log_time += (std::log(s.step_time) - p.log_time) / p.weight;  // running mean
  }
  return points;
}

// The fit optimises a subset of the parameters ("free"); the others are fixed or tied.
struct FitProblem {
  std::vector<FitPoint> points;
  std::array<double, kNumParams> fixed{};
  std::array<int, kNumParams> source{};  // >= 0: index into the free vector; -1: fixed; -2-k: same as param k

  PolluxParams Expand(const std::vector<double>& x) const {
    std::array<double, kNumParams> v{};
    for (int i = 0; i < kNumParams; ++i) {
      if (source[i] >= 0) v[i] = x[static_cast<size_t>(source[i])];
      else if (source[i] == -1) v[i] = fixed[i];
    }
    for (int i = 0; i < kNumParams; ++i) {
      if (source[i] <= -2) v[i] = v[-2 - source[i]];
    }
    return {v[kAlphaC], v[kBetaC], v[kAlphaN], v[kBetaN], v[kAlphaR], v[kBetaR], v[kGamma]};
  }

  double Loss(const std::vector<double>& x) const {
    const PolluxParams p = Expand(x);
    double loss = 0.0;
    for (const FitPoint& s : points) {
      const double pred = PolluxStepTime(p, s.nodes, s.gpus, s.local_batch, 0);
      const double d = std::log(std::max(pred, 1e-300)) - s.log_time;
      loss += s.weight * d * d;
    }
    return loss;
  }
};

double NloptLoss(const std::vector<double>& x, std::vector<double>& /*grad*/, void* data) {
  return static_cast<const FitProblem*>(data)->Loss(x);
}

}  // namespace

Result<PolluxParams> FitPollux(const std::vector<StepSample>& samples, const std::optional<PolluxParams>& warm_start) {
  if (samples.empty()) return Status(ErrorKind::kInvalidArgument, "no step-time samples to fit");
  double tmax = 0.0, tmin = std::numeric_limits<double>::infinity(), bmin = tmin;
  bool multi_gpu = false, multi_node = false, beyond_two = false;
  for (const StepSample& s : samples) {
    if (!(s.step_time > 0.0) || !(s.local_batch > 0.0) || s.gpus < 1 || s.nodes < 1 || s.nodes > s.gpus) {
      return Status(ErrorKind::kInvalidArgument, "a step-time sample needs step_time > 0, local_batch > 0 and 1 <= nodes <= gpus");
    }
    tmax = std::max(tmax, s.step_time);
    tmin = std::min(tmin, s.step_time);
    bmin = std::min(bmin, s.local_batch);
    multi_gpu = multi_gpu || s.gpus > 1;
    multi_node = multi_node || s.nodes > 1;
    beyond_two = beyond_two || s.gpus > 2;
  }
  FitProblem fp;
  fp.points = FitPoints(samples);
  // Optimistic priors where the data says nothing: perfect scaling without multi-GPU data,
  // no per-replica growth without more than two replicas, cross-node like intra-node
  // without multi-node data.
  fp.fixed = {0, 0, 0, 0, 0, 0, 1.0};
  std::array<bool, kNumParams> is_free{true, true, multi_gpu, multi_gpu && beyond_two, multi_gpu,
                                       multi_gpu && beyond_two, multi_gpu};
  int n = 0;
  for (int i = 0; i < kNumParams; ++i) fp.source[i] = is_free[i] ? n++ : -1;
  if (multi_gpu && !multi_node) {
    fp.source[kAlphaN] = -2 - kAlphaR;
    fp.source[kBetaN] = -2 - kBetaR;
    // Renumber the free parameters after removing the tied ones.
    n = 0;
    for (int i = 0; i < kNumParams; ++i) {
      if (fp.source[i] >= 0) fp.source[i] = n++;
    }
  }
  std::vector<double> lb, ub, x0;
  const std::array<double, kNumParams> lo = {tmin * 1e-6, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0};
  const std::array<double, kNumParams> hi = {10 * tmax, 10 * tmax / bmin, 10 * tmax, 10 * tmax, 10 * tmax, 10 * tmax, 10.0};
  const std::array<double, kNumParams> start = {tmin / 2, tmin / (2 * bmin), tmin / 4, tmin / 100, tmin / 4, tmin / 100, 1.5};
  for (int i = 0; i < kNumParams; ++i) {
    if (fp.source[i] < 0) continue;
    lb.push_back(lo[i]);
    ub.push_back(hi[i]);
    x0.push_back(std::clamp(start[i], lo[i], hi[i]));
  }
  // Two cold starts (little and much overlap of compute and communication), or one local search
  // from a previous fit (warm_start: a refit on samples that changed a little): its first steps are
  // a tenth of each parameter (at least 1e-4 of its range), so it stays near that fit's optimum
  // unless the new samples move it.
  std::vector<std::vector<double>> starts;
  std::vector<double> first_step;
  if (warm_start) {
    const PolluxParams& w = *warm_start;
    const std::array<double, kNumParams> prev = {w.alpha_c, w.beta_c, w.alpha_n, w.beta_n, w.alpha_r, w.beta_r, w.gamma};
    std::vector<double> x;
    for (int i = 0; i < kNumParams; ++i) {
      if (fp.source[i] < 0) continue;
      const double v = std::isfinite(prev[i]) ? std::clamp(prev[i], lo[i], hi[i]) : x0[x.size()];
      first_step.push_back(std::max(0.1 * std::abs(v), 1e-4 * (hi[i] - lo[i])));
      x.push_back(v);
    }
    starts.push_back(std::move(x));
  } else {
    for (double gamma0 : {1.5, 5.0}) {
      std::vector<double> x = x0;
      if (fp.source[kGamma] >= 0) x[static_cast<size_t>(fp.source[kGamma])] = gamma0;
      starts.push_back(std::move(x));
    }
  }
  std::vector<double> best_x = starts.front();
  double best = fp.Loss(best_x);
  // Keep the better fit.
  for (std::vector<double>& x : starts) {
    nlopt::opt opt(nlopt::LN_BOBYQA, static_cast<unsigned>(x.size()));
    opt.set_lower_bounds(lb);
    opt.set_upper_bounds(ub);
    opt.set_min_objective(NloptLoss, &fp);
    opt.set_xtol_rel(1e-10);
    opt.set_ftol_abs(1e-16);
    opt.set_maxeval(20000);
    if (!first_step.empty()) opt.set_initial_step(first_step);
    double value = 0.0;
    try {
      opt.optimize(x, value);
    } catch (const std::exception&) {
      value = fp.Loss(x);  // roundoff-limited stops still leave a usable point
    }
    if (value < best) {
      best = value;
      best_x = x;
    }
  }
  return fp.Expand(best_x);
}

std::optional<double> PolluxThroughput::StepTime(const Placement& pl, double local_batch, int accum_steps) const {
  auto it = params_.find(pl.gpu_type);
  if (it == params_.end()) return std::nullopt;
  return PolluxStepTime(it->second, pl.nodes, pl.gpus, local_batch, accum_steps);
}

ProfileThroughput::ProfileThroughput(std::map<std::string, std::vector<StepSample>> profiles)
    : profiles_(std::move(profiles)) {
  for (auto& [type, s] : profiles_) {
    std::sort(s.begin(), s.end(), [](const StepSample& a, const StepSample& b) {
      return a.gpus != b.gpus ? a.gpus < b.gpus : a.local_batch < b.local_batch;
    });
  }
}

std::optional<double> ProfileThroughput::AtGpus(const std::vector<StepSample>& samples, int gpus,
                                                double local_batch) const {
  std::vector<const StepSample*> pts;
  for (const StepSample& s : samples) {
    if (s.gpus == gpus) pts.push_back(&s);
  }
  if (pts.empty()) return std::nullopt;
  if (pts.size() == 1) return pts[0]->step_time * local_batch / pts[0]->local_batch;
  // Linear in the local batch between the two nearest samples (end segments extrapolate).
  size_t i = 1;
  while (i + 1 < pts.size() && pts[i]->local_batch < local_batch) ++i;
  const StepSample& a = *pts[i - 1];
  const StepSample& b = *pts[i];
  if (b.local_batch == a.local_batch) return std::max(a.step_time, b.step_time);
  const double t = a.step_time + (b.step_time - a.step_time) * (local_batch - a.local_batch) / (b.local_batch - a.local_batch);
  return std::max(t, 1e-3 * std::min(a.step_time, b.step_time));
}

std::optional<double> ProfileThroughput::StepTime(const Placement& pl, double local_batch, int accum_steps) const {
  auto it = profiles_.find(pl.gpu_type);
  if (it == profiles_.end() || it->second.empty()) return std::nullopt;
  const std::vector<StepSample>& s = it->second;
  std::optional<double> step = AtGpus(s, pl.gpus, local_batch);
  if (!step) {
    // Between the nearest measured GPU counts below and above.
    int below = 0, above = std::numeric_limits<int>::max();
    for (const StepSample& x : s) {
      if (x.gpus < pl.gpus) below = std::max(below, x.gpus);
      if (x.gpus > pl.gpus) above = std::min(above, x.gpus);
    }
    if (below == 0 || above == std::numeric_limits<int>::max()) return std::nullopt;
    const double ta = *AtGpus(s, below, local_batch);
    const double tb = *AtGpus(s, above, local_batch);
    step = ta + (tb - ta) * (pl.gpus - below) / static_cast<double>(above - below);
  }
  if (accum_steps > 0) {
    std::optional<double> compute = AtGpus(s, 1, local_batch);
    *step += accum_steps * compute.value_or(*step);
  }
  return step;
}

double StatisticalEfficiency(const EfficiencyParams& p, double batch) {
  const double s = batch / p.init_batch;
  return (p.grad_var + p.grad_sqr) / (p.grad_var / s + p.grad_sqr) / s;
}

std::optional<BatchChoice> GoodputModel::Evaluate(const Job& job, const Placement& pl, int64_t batch) const {
  if (batch < job.min_batch || batch > job.max_batch || pl.gpus < 1) return std::nullopt;
  const int64_t per_gpu = batch / pl.gpus;
  int64_t accum = 0;
  if (per_gpu > job.max_local_batch) {
    if (!job.accumulation) return std::nullopt;
    accum = (per_gpu + job.max_local_batch - 1) / job.max_local_batch - 1;
  }
  const int64_t local = batch / (pl.gpus * (accum + 1));
  if (local < job.min_local_batch || local < 1) return std::nullopt;
  BatchChoice c;
  c.batch = local * pl.gpus * (accum + 1);  // whole samples per GPU and micro-step
  if (c.batch < job.min_batch) return std::nullopt;
  c.local_batch = static_cast<double>(local);
  c.accum_steps = static_cast<int>(accum);
  const std::optional<double> t = throughput_->StepTime(pl, c.local_batch, c.accum_steps);
  if (!t || !(*t > 0.0)) return std::nullopt;
  c.throughput = static_cast<double>(c.batch) / *t;
  c.efficiency = StatisticalEfficiency(efficiency_, static_cast<double>(c.batch));
  c.goodput = c.throughput * c.efficiency;
  return c;
}

std::optional<BatchChoice> GoodputModel::BestBatch(const Job& job, const Placement& pl) const {
  const double lo = std::max<double>(static_cast<double>(job.min_batch),
                                     static_cast<double>(pl.gpus) * static_cast<double>(job.min_local_batch));
  double hi = static_cast<double>(job.max_batch);
  if (!job.accumulation) hi = std::min(hi, static_cast<double>(pl.gpus) * static_cast<double>(job.max_local_batch));
  hi = std::min(hi, lo * 1048576.0);  // unbounded jobs: search 20 doublings
  if (hi < lo) return std::nullopt;
  std::optional<BatchChoice> best;
  constexpr int kCandidates = 50;
  for (int i = 0; i < kCandidates; ++i) {
    const double b = lo * std::pow(hi / lo, i / static_cast<double>(kCandidates - 1));
    const auto batch = static_cast<int64_t>(std::llround(b));
    std::optional<BatchChoice> c = Evaluate(job, pl, batch);
    if (c && (!best || c->goodput > best->goodput)) best = c;
  }
  return best;
}

Result<std::vector<Option>> GenerateOptions(const Job& job, const Cluster& cluster) {
  if (!job.model) return Status(ErrorKind::kInvalidArgument, "job '" + job.id + "' has no goodput model");
  std::vector<Option> out;
  double base = 0.0;
  std::string base_type = job.current ? job.current->gpu_type : std::string();
  for (const GpuType& t : cluster.types) {
    if (!job.TypeAllowed(t.name) || t.capacity() < job.min_gpus) continue;
    for (int n = job.min_gpus; n <= std::min(job.max_gpus, t.capacity()); n += job.gpu_step) {
      const int nodes = (n + t.gpus_per_node - 1) / t.gpus_per_node;
      const std::optional<BatchChoice> c = job.model->BestBatch(job, {t.name, nodes, n});
      if (!c || !(c->goodput > 0.0)) continue;
      if (n == job.min_gpus && base == 0.0 && (base_type.empty() || base_type == t.name)) base = c->goodput;
      out.push_back({t.name, n, c->batch, c->goodput});
    }
  }
  if (out.empty()) return Status(ErrorKind::kInvalidArgument, "job '" + job.id + "': the model predicts no configuration");
  if (base == 0.0) base = out.front().utility;  // base type not predictable: first prediction
  for (Option& o : out) o.utility /= base;
  return out;
}

}  // namespace elastic::optimizer
