#include "metrics_check.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace elastic::controller {
namespace {

std::string Num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

bool Whole(double v) { return std::isfinite(v) && v == std::floor(v); }

std::string List(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

}  // namespace

std::string_view MetricsRuleName(MetricsRule rule) {
  switch (rule) {
    case MetricsRule::kStepTime: return "step_time";
    case MetricsRule::kGpus: return "gpus";
    case MetricsRule::kBatchRange: return "batch_range";
    case MetricsRule::kBatch: return "batch";
    case MetricsRule::kLocalBatch: return "local_batch";
    case MetricsRule::kGradStats: return "grad_stats";
    case MetricsRule::kLrFactor: return "lr_factor";
    case MetricsRule::kProgress: break;
  }
  return "progress";
}

nlohmann::json MetricsVerdict::ReplyJson() const {
  nlohmann::json out = nlohmann::json::object();
  auto list = [](const std::vector<MetricsFinding>& findings) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& f : findings) {
      nlohmann::json e{{"field", f.field}, {"rule", MetricsRuleName(f.rule)}, {"message", f.message}};
      if (f.used) e["used"] = *f.used;
      a.push_back(std::move(e));
    }
    return a;
  };
  if (!refused.empty()) out["refused"] = list(refused);
  if (!clamped.empty()) out["clamped"] = list(clamped);
  return out;
}

MetricsVerdict CheckMetrics(const MetricsReport& m, const MetricsExpectation& x) {
  MetricsVerdict v;
  auto refuse = [&](MetricsRule rule, const char* field, std::string message) {
    v.refused.push_back({rule, field, std::move(message), std::nullopt});
  };

  // The GPU count: what Slurm allocated to the job and its extensions.
  std::optional<int> gpus;
  if (m.gpus) {
    const double g = *m.gpus;
    const std::string allocated = x.gpus_min == x.gpus_max
                                      ? std::to_string(x.gpus_min)
                                      : std::to_string(x.gpus_min) + " to " + std::to_string(x.gpus_max) +
                                            " while a rescale is in flight";
    if (!Whole(g) || g < x.gpus_min || g > x.gpus_max) {
      refuse(MetricsRule::kGpus, "gpus",
             "gpus " + Num(g) + " is not what Slurm allocated to job " + std::to_string(x.job) +
                 " and its extensions (" + allocated + "); its step time is not used");
    } else {
      gpus = static_cast<int>(g);
    }
  }

  // The global batch: within the registered bounds, and the batch elasticd set.
  std::optional<int64_t> batch;
  bool batch_refused = false;
  if (m.global_batch) {
    const double b = *m.global_batch;
    if (!Whole(b) || b < 1 || b < static_cast<double>(x.batch_min) || b > static_cast<double>(x.batch_max)) {
      batch_refused = true;
      const std::string bounds = x.batch_max == MetricsExpectation::kNoBatchMax
                                     ? "a positive whole number"
                                     : "within the job's bounds " + std::to_string(x.batch_min) + "-" +
                                           std::to_string(x.batch_max);
      refuse(MetricsRule::kBatchRange, "global_batch", "global_batch " + Num(b) + " is not " + bounds);
    } else if (!x.batches.empty() &&
               std::find(x.batches.begin(), x.batches.end(), static_cast<int64_t>(b)) == x.batches.end()) {
      batch_refused = true;
      refuse(MetricsRule::kBatch, "global_batch",
             "global_batch " + Num(b) + " is not the batch elasticd set for job " + std::to_string(x.job) + " (" +
                 List(x.batches) + ")");
    } else {
      batch = static_cast<int64_t>(b);
    }
  }
  v.batch = batch;
  // The batch the step ran at: the reported one, else the only one elasticd knows of.
  // 0: none.
  int64_t step_batch = 0;
  if (batch) {
    step_batch = *batch;
  } else if (!batch_refused && x.batches.size() == 1) {
    step_batch = x.batches.front();
  }

  // The local batch: one GPU's share of the global batch (shares differ by at most one sample).
  std::optional<double> local;
  if (m.local_batch) {
    const double l = *m.local_batch;
    if (!Whole(l) || l < 1) {
      refuse(MetricsRule::kLocalBatch, "local_batch", "local_batch " + Num(l) + " is not a positive whole number");
    } else if (gpus && step_batch > 0 && std::abs(l * *gpus - static_cast<double>(step_batch)) >= *gpus) {
      refuse(MetricsRule::kLocalBatch, "local_batch",
             "local_batch " + Num(l) + " is not one GPU's share of global_batch " + std::to_string(step_batch) +
                 " over " + std::to_string(*gpus) + " GPUs; its step time is not used");
    } else {
      local = l;
    }
  }

  // The step time: within physical bounds.
  std::optional<double> step_time;
  if (m.step_time_s) {
    const double t = *m.step_time_s;
    if (!(std::isfinite(t) && t >= kMinStepTimeS && t <= kMaxStepTimeS)) {
      refuse(MetricsRule::kStepTime, "step_time_s",
             "step_time_s " + Num(t) + " is outside the physical bounds of a step, " + Num(kMinStepTimeS) + " to " +
                 Num(kMaxStepTimeS) + " s");
    } else {
      step_time = t;
    }
  }

  // Progress: the samples trained per wall-clock second bound the throughput the step time claims.
  if (m.samples > 0 && gpus && step_batch > 0 && !batch_refused) {
    v.mark = ProgressMark{x.now, m.samples, *gpus, step_batch};
    const auto& p = x.previous;
    if (step_time && p && p->gpus == *gpus && p->batch == step_batch && x.now - p->at >= kMinProgressWindowS &&
        m.samples > p->samples) {
      const double progress = static_cast<double>(m.samples - p->samples) / (x.now - p->at);  // samples/s
      const double claimed = static_cast<double>(step_batch) / *step_time;
      if (claimed > kProgressSlack * progress) {
        const double used = static_cast<double>(step_batch) / progress;
        v.clamped.push_back({MetricsRule::kProgress, "step_time_s",
                             "step_time_s " + Num(*step_time) + " claims " + Num(claimed) +
                                 " samples/s, but the job trained " + Num(progress) + " samples/s over the last " +
                                 Num(x.now - p->at) + " s; its step time counts as " + Num(used) + " s",
                             used});
        step_time = used;
      }
    }
  }

  if (gpus && local && step_time && !m.accumulates && !batch_refused) v.step = MetricsVerdict::Step{*gpus, *local, *step_time};

  // Gradient statistics: squared norms and variances are never negative.
  bool grad_bad = false;
  for (auto [field, value] : {std::pair{"grad_sqr", m.grad_sqr}, std::pair{"grad_var", m.grad_var}}) {
    if (value && !(std::isfinite(*value) && *value >= 0)) {
      grad_bad = true;
      refuse(MetricsRule::kGradStats, field, std::string(field) + " " + Num(*value) + " is negative or not finite");
    }
  }
  v.grad_stats_ok = !grad_bad && m.grad_sqr && m.grad_var;

  if (m.lr_factor) {
    if (std::isfinite(*m.lr_factor) && *m.lr_factor > 0) {
      v.lr_factor = *m.lr_factor;
    } else {
      refuse(MetricsRule::kLrFactor, "lr_factor", "lr_factor " + Num(*m.lr_factor) + " is not a positive number");
    }
  }
  return v;
}

}  // namespace elastic::controller
