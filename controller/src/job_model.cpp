#include "job_model.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace elastic::controller {
namespace {

// The global batch is the model's to choose only for a job that allows it (--elastic-batch) and
// whose gradient noise has been measured: without statistics there is no basis for a batch.
bool ChoosesBatch(const ElasticJob& job) { return BatchElastic(job) && job.efficiency.has_value(); }

// The bounds the optimizer chooses a batch within.
optimizer::Job BatchSpec(const ElasticJob& job, int max_gpus) {
  optimizer::Job s;
  s.min_gpus = job.base_gpus;
  s.max_gpus = max_gpus;
  const contract::JobSpec spec = job.Spec();
  s.gpu_step = static_cast<int>(spec.GpuStep());
  s.min_batch = spec.batch.min.value_or(1);
  s.max_batch = spec.batch.max.value_or(INT32_MAX);
  s.min_local_batch = spec.local_batch.min.value_or(1);
  s.max_local_batch = spec.local_batch.max.value_or(INT32_MAX);
  s.accumulation = false;  // the runtime has no gradient accumulation: a GPU's share is its batch
  return s;
}

// Linear scaling at most: a step at n GPUs takes no less time than a step with the same local
// batch at the job's base size `ref` (so n GPUs never train more than n / ref times what the base
// trains with the same share each, and the option table's utility, relative to the base, never
// grows faster than n / base). The step-time form cannot predict more within one node (its
// synchronisation only grows with GPUs), but a fit whose cross-node terms came out cheaper than
// its intra-node ones would, and no such gain is physical: the cap keeps the model from
// extrapolating one.
// Within the base's node count the form's synchronisation never shrinks as GPUs are added, so only
// a placement on more nodes than the base can need the cap (the epoch evaluates many).
class LinearScalingCap final : public optimizer::ThroughputModel {
 public:
  LinearScalingCap(std::shared_ptr<const optimizer::PolluxThroughput> inner, optimizer::Placement ref)
      : inner_(std::move(inner)), ref_(std::move(ref)) {}
  std::optional<double> StepTime(const optimizer::Placement& pl, double local_batch, int accum_steps) const override {
    std::optional<double> t = inner_->StepTime(pl, local_batch, accum_steps);
    if (!t || pl.gpus <= ref_.gpus || pl.nodes <= ref_.nodes) return t;
    optimizer::Placement ref = ref_;
    ref.gpu_type = pl.gpu_type;
    const std::optional<double> t_ref = inner_->StepTime(ref, local_batch, accum_steps);
    return t_ref ? std::max(*t, *t_ref) : t;
  }

 private:
  std::shared_ptr<const optimizer::PolluxThroughput> inner_;
  optimizer::Placement ref_;
};

optimizer::Placement PlacementOf(const ElasticJob& job, int gpus, int gpus_per_node) {
  return {job.gpu_type, std::max(1, (gpus + gpus_per_node - 1) / gpus_per_node), gpus};
}

// The job's goodput model: its last step-time fit (FitModel), capped at linear scaling from its
// base size, and its gradient-noise statistics. One GPU count cannot separate a step's fixed cost
// from its per-sample cost, and a fit then predicts anything: until the job has run at two sizes
// there is no model (the prior decides). The fit saw the samples as PlausibleSamples leaves them:
// no measured speed-up beyond linear either.
std::optional<optimizer::GoodputModel> Model(const ElasticJob& job, int gpus_per_node) {
  if (!job.fit || MeasuredSizes(job) < 2) return std::nullopt;
  auto fit = std::make_shared<optimizer::PolluxThroughput>(
      std::map<std::string, optimizer::PolluxParams>{{job.gpu_type, *job.fit}});
  auto tp = std::make_shared<LinearScalingCap>(fit, PlacementOf(job, job.base_gpus, gpus_per_node));
  // Without statistics the efficiency is never consulted (the batch stays fixed, ChoosesBatch).
  return optimizer::GoodputModel(tp, job.efficiency.value_or(optimizer::EfficiencyParams{1.0, 1.0, 0.0}));
}

// A number in [0, 1) fixed by the job and its fit (splitmix64): the jitter of its refit period.
double RefitJitter(uint32_t job, uint64_t generation) {
  uint64_t z = (static_cast<uint64_t>(job) << 32) ^ generation;
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) / 9007199254740992.0;  // 53 bits
}

// Goodput of a global batch split over the placement's GPUs as the runtime splits it (shares
// differ by at most one sample; the largest sets the step time). nullopt when not predictable.
std::optional<double> Goodput(const optimizer::GoodputModel& model, const optimizer::Placement& pl, int64_t batch) {
  if (batch <= 0 || pl.gpus <= 0) return std::nullopt;
  const double local = std::ceil(static_cast<double>(batch) / pl.gpus);
  const std::optional<double> t = model.throughput().StepTime(pl, local, 0);
  if (!t || !(*t > 0.0)) return std::nullopt;
  return static_cast<double>(batch) / *t * optimizer::StatisticalEfficiency(model.efficiency(), static_cast<double>(batch));
}

}  // namespace

std::vector<optimizer::StepSample> PlausibleSamples(const std::vector<optimizer::StepSample>& samples) {
  std::vector<optimizer::StepSample> out = samples;
  // Samples grouped by (GPUs, local batch), in that order. A group's reference is its fastest
  // sample: noise (a first step that compiles, a checkpoint) only ever slows a step down, so the
  // fastest one is the closest to what the hardware does. Each group is bounded by the groups
  // before it as already bounded: a bound derived from a clamped group is what the job's
  // measurements support.
  std::map<std::pair<int, double>, std::vector<size_t>> groups;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].step_time > 0 && out[i].local_batch > 0) groups[{out[i].gpus, out[i].local_batch}].push_back(i);
  }
  std::vector<std::pair<std::pair<int, double>, double>> fastest;  // the groups done: key, fastest step
  for (const auto& [key, members] : groups) {
    const auto [gpus, local] = key;
    double floor = 0;
    for (const auto& [p, t] : fastest) {
      if (p.first < gpus) {
        // More GPUs: no faster than p with at least p's share each (more work, more
        // synchronisation), and with a smaller share no more samples per GPU per second.
        floor = std::max(floor, t * std::min(1.0, local / p.second));
      } else if (p.second < local) {
        floor = std::max(floor, t);  // the same GPUs, more work: no faster
      }
    }
    double best = std::numeric_limits<double>::infinity();
    for (size_t i : members) {
      out[i].step_time = std::max(out[i].step_time, floor);
      best = std::min(best, out[i].step_time);
    }
    fastest.push_back({key, best});
  }
  return out;
}

int MeasuredSizes(const ElasticJob& job) {
  // A job runs at few sizes: a short list beats a set over its (up to 256) samples.
  std::vector<int> sizes;
  for (const auto& smp : job.samples) {
    if (std::find(sizes.begin(), sizes.end(), smp.gpus) == sizes.end()) sizes.push_back(smp.gpus);
  }
  return static_cast<int>(sizes.size());
}

FitNeed FitDue(const ElasticJob& job, double now) {
  const int sizes = MeasuredSizes(job);
  if (sizes < 2) return FitNeed::kNone;
  if (job.fit_generation == 0 || static_cast<size_t>(sizes) > job.fit_sizes) return FitNeed::kNewSize;
  if (job.samples.size() >= 2 * job.fit_samples) return FitNeed::kMoreSamples;
  // A stale fit of the same samples would come out the same: refitted only once metrics arrived.
  if (now >= job.refit_at && job.metrics_received != job.fit_metrics) return FitNeed::kStale;
  return FitNeed::kNone;
}

void FitModel(const ElasticJob& job, double now) {
  const size_t sizes = static_cast<size_t>(MeasuredSizes(job));
  const bool refit = job.fit.has_value() && sizes == job.fit_sizes;
  auto fitted = optimizer::FitPollux(PlausibleSamples(job.samples), refit ? job.fit : std::nullopt);
  job.fit = fitted.ok() ? std::optional<optimizer::PolluxParams>(fitted.value()) : std::nullopt;
  ++job.fit_generation;
  job.fit_samples = job.samples.size();
  job.fit_sizes = sizes;
  job.fit_metrics = job.metrics_received;
  job.fit_at = now;
  job.refit_at = now + kRefitPeriodS * (0.75 + 0.5 * RefitJitter(job.id, job.fit_generation));
  job.fit_wanted_since = 0;
}

std::optional<optimizer::EfficiencyParams> EfficiencyFromMetrics(double grad_sqr, double grad_var, double base_batch) {
  if (!std::isfinite(grad_sqr) || !std::isfinite(grad_var) || !(grad_sqr > 0) || !(grad_var > 0) || !(base_batch > 0)) {
    return std::nullopt;
  }
  return optimizer::EfficiencyParams{base_batch, grad_sqr, grad_var / base_batch};
}

double NoiseScale(const optimizer::EfficiencyParams& p) {
  if (!(p.grad_sqr > 0)) return std::numeric_limits<double>::infinity();
  return p.grad_var * p.init_batch / p.grad_sqr;
}

bool BatchElastic(const ElasticJob& job) {
  const contract::JobSpec spec = job.Spec();
  return spec.batch.min.value_or(0) > 0 && spec.batch.max.value_or(0) >= spec.batch.min.value_or(0);
}

std::vector<optimizer::Option> JobOptions(const ElasticJob& job, int max_gpus, int gpus_per_node) {
  std::vector<optimizer::Option> options;
  const int base = job.base_gpus;
  const int step = static_cast<int>(job.Spec().GpuStep());
  const optimizer::Job spec = BatchSpec(job, max_gpus);
  const std::optional<optimizer::GoodputModel> model = Model(job, gpus_per_node);
  const bool choose = ChoosesBatch(job);
  // The best batch and its goodput at n GPUs: the model's search within the bounds, or the
  // current batch when the batch is not the model's to choose.
  auto best = [&](int n) -> std::optional<std::pair<int64_t, double>> {
    const optimizer::Placement pl = PlacementOf(job, n, gpus_per_node);
    if (choose) {
      auto b = model->BestBatch(spec, pl);
      if (!b) return std::nullopt;
      return std::make_pair(b->batch, b->goodput);
    }
    auto g = Goodput(*model, pl, job.batch);
    if (!g) return std::nullopt;
    return std::make_pair(job.batch, *g);
  };
  double base_goodput = 0;
  if (model && (choose || job.batch > 0)) {
    if (auto b = best(base)) base_goodput = b->second;
  }
  for (int n = base; n <= max_gpus; n += step) {
    optimizer::Option o;
    o.gpu_type = job.gpu_type;
    o.gpus = n;
    if (base_goodput > 0) {
      auto b = best(n);
      if (!b || !(b->second > 0)) continue;
      o.batch = b->first;
      o.utility = b->second / base_goodput;
    } else {
      // No measurement yet: an optimistic prior (Pollux's), near-linear speed-up that loses 5%
      // per doubling, so that free GPUs are used and measured data corrects it.
      double r = static_cast<double>(n) / base;
      o.utility = r * std::pow(0.95, std::log2(r));
      o.batch = job.batch;
    }
    options.push_back(o);
  }
  return options;
}

std::optional<double> BatchGain(const ElasticJob& job, int gpus, int gpus_per_node, int64_t from_batch,
                                int64_t to_batch) {
  const std::optional<optimizer::GoodputModel> model = Model(job, gpus_per_node);
  if (!model || !ChoosesBatch(job)) return std::nullopt;
  const optimizer::Placement pl = PlacementOf(job, gpus, gpus_per_node);
  const std::optional<double> from = Goodput(*model, pl, from_batch);
  const std::optional<double> to = Goodput(*model, pl, to_batch);
  if (!from || !to || !(*from > 0)) return std::nullopt;
  return *to / *from;
}

bool DecideBatchChange(const ElasticJob& job, int gpus, int64_t target_batch, bool frozen, int gpus_per_node,
                       double min_gain, nlohmann::json& decision) {
  decision["action"] = "stay";
  if (frozen || target_batch <= 0 || job.batch <= 0 || target_batch == job.batch || !ChoosesBatch(job)) return false;
  const std::optional<double> gain = BatchGain(job, gpus, gpus_per_node, job.batch, target_batch);
  if (!gain) return false;
  decision["gain"] = *gain;
  if (*gain < 1.0 + min_gain) return false;
  decision["action"] = "batch";
  return true;
}

std::optional<double> TimeLeftAtCurrentSize(const ElasticJob& job, double now) {
  if (job.total_samples <= 0 || job.samples.empty()) return std::nullopt;
  const optimizer::StepSample& last = job.samples.back();
  if (!(last.step_time > 0) || !(last.local_batch > 0) || last.gpus <= 0) return std::nullopt;
  const double rate = last.gpus * last.local_batch / last.step_time;  // samples per second
  double left = static_cast<double>(std::max<int64_t>(0, job.total_samples - job.samples_done)) / rate;
  if (job.metrics_at > 0 && now > job.metrics_at) left -= now - job.metrics_at;  // trained since
  return std::max(0.0, left);
}

}  // namespace elastic::controller
