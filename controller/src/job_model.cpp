#include "job_model.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>

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

// The job's goodput model: its step-time fit and its gradient-noise statistics. One GPU count
// cannot separate a step's fixed cost from its per-sample cost, and a fit then predicts anything:
// until the job has run at two sizes there is no model (the prior decides).
std::optional<optimizer::GoodputModel> Model(const ElasticJob& job, double now) {
  std::set<int> sizes;
  for (const auto& smp : job.samples) sizes.insert(smp.gpus);
  if (sizes.size() < 2) return std::nullopt;
  if (!job.fit || sizes.size() > job.fit_sizes || job.samples.size() >= 2 * job.fit_samples || now - job.fit_at > 300) {
    auto fitted = optimizer::FitPollux(job.samples);
    job.fit = fitted.ok() ? std::optional<optimizer::PolluxParams>(fitted.value()) : std::nullopt;
    job.fit_samples = job.samples.size();
    job.fit_sizes = sizes.size();
    job.fit_at = now;
  }
  if (!job.fit) return std::nullopt;
  auto tp = std::make_shared<optimizer::PolluxThroughput>(
      std::map<std::string, optimizer::PolluxParams>{{job.gpu_type, *job.fit}});
  // Without statistics the efficiency is never consulted (the batch stays fixed, ChoosesBatch).
  return optimizer::GoodputModel(tp, job.efficiency.value_or(optimizer::EfficiencyParams{1.0, 1.0, 0.0}));
}

optimizer::Placement PlacementOf(const ElasticJob& job, int gpus, int gpus_per_node) {
  return {job.gpu_type, std::max(1, (gpus + gpus_per_node - 1) / gpus_per_node), gpus};
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

std::vector<optimizer::Option> JobOptions(const ElasticJob& job, int max_gpus, int gpus_per_node, double now) {
  std::vector<optimizer::Option> options;
  const int base = job.base_gpus;
  const int step = static_cast<int>(job.Spec().GpuStep());
  const optimizer::Job spec = BatchSpec(job, max_gpus);
  const std::optional<optimizer::GoodputModel> model = Model(job, now);
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
                                int64_t to_batch, double now) {
  const std::optional<optimizer::GoodputModel> model = Model(job, now);
  if (!model || !ChoosesBatch(job)) return std::nullopt;
  const optimizer::Placement pl = PlacementOf(job, gpus, gpus_per_node);
  const std::optional<double> from = Goodput(*model, pl, from_batch);
  const std::optional<double> to = Goodput(*model, pl, to_batch);
  if (!from || !to || !(*from > 0)) return std::nullopt;
  return *to / *from;
}

bool DecideBatchChange(const ElasticJob& job, int gpus, int64_t target_batch, bool frozen, int gpus_per_node,
                       double min_gain, double now, nlohmann::json& decision) {
  decision["action"] = "stay";
  if (frozen || target_batch <= 0 || job.batch <= 0 || target_batch == job.batch || !ChoosesBatch(job)) return false;
  const std::optional<double> gain = BatchGain(job, gpus, gpus_per_node, job.batch, target_batch, now);
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
