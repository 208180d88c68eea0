// Plausibility of a job's self-reported metrics (docs/interfaces.md section 3, "Plausibility of
// metrics"). The runtime's `metrics` message is written by the job's owner's processes, so elasticd
// believes only what physics and its own records allow: a value outside physical bounds, a GPU
// count other than what Slurm allocated, a batch other than the job's bounds or what elasticd set,
// a local batch that is not the global batch's share, or negative gradient statistics is refused
// (the rest of the message still counts); a step time faster than the job's measured progress
// (samples trained per wall-clock second, as elasticd sees them arrive) is clamped to that
// progress. The decision is a pure function of the message and of what elasticd expects; the
// controller applies it, logs it and names it in the reply.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace elastic::controller {

// One rule of the check; each is logged once per job (MetricsTrust::logged).
enum class MetricsRule : uint8_t {
  kStepTime,    // step_time_s: not finite, not positive, below kMinStepTimeS or above kMaxStepTimeS
  kGpus,        // gpus: not a whole number, or not what Slurm allocated to the job and its extensions
  kBatchRange,  // global_batch: not a positive whole number, or outside the job's registered bounds
  kBatch,       // global_batch: not the batch elasticd set (or is setting) for the job
  kLocalBatch,  // local_batch: not a positive whole number, or not the global batch's share of one GPU
  kGradStats,   // grad_sqr, grad_var: negative or not finite
  kLrFactor,    // lr_factor: not finite or not positive
  kProgress,    // step_time_s: faster than the samples the job trained per second (clamped)
};
inline constexpr int kMetricsRules = 8;

// "step_time", "gpus", "batch_range", "batch", "local_batch", "grad_stats", "lr_factor", "progress".
std::string_view MetricsRuleName(MetricsRule rule);

// Physical bounds of one training step: no step (a forward and a backward pass, and with several
// GPUs a gradient collective; kernel launches alone take tens of microseconds) completes in under
// 100 microseconds, and a step of an hour would leave a job no rescale point in a scheduling
// horizon.
inline constexpr double kMinStepTimeS = 1e-4;
inline constexpr double kMaxStepTimeS = 3600;
// Progress: two messages at least this far apart (seconds) at the same GPU count and batch, with
// no command acknowledged in between, compare the step time with the samples trained. Steps of
// an honest job fill most of its wall-clock time; a step time that claims more than kProgressSlack
// times the throughput its progress shows is clamped to what the progress shows.
inline constexpr double kMinProgressWindowS = 2.0;
inline constexpr double kProgressSlack = 2.0;

// The job's progress when a metrics message arrived: the start of the next progress window.
struct ProgressMark {
  double at = 0;        // Unix seconds, elasticd's clock
  int64_t samples = 0;  // the message's `samples`
  int gpus = 0;
  int64_t batch = 0;
};

// What elasticd keeps per job about its metrics (not persisted: after a restart it starts afresh).
struct MetricsTrust {
  // The job's batch (ElasticJob::batch) came from its runtime since the job (re)registered; until
  // then any batch within the bounds is accepted (a requeued program starts at its own batch).
  bool batch_confirmed = false;
  std::optional<ProgressMark> mark;  // the last message with progress; reset by acks
  uint32_t logged = 0;               // rules already logged for this job (bit 1 << rule)
};

// The message's fields, as sent (nullopt: absent or null).
struct MetricsReport {
  std::optional<double> gpus, global_batch, local_batch, step_time_s, grad_sqr, grad_var, lr_factor;
  int64_t samples = 0;      // progress (0: not reported)
  bool accumulates = false;  // accum_steps != 0: no step-time sample (the model has no accumulation)
};

// What elasticd expects of the job.
struct MetricsExpectation {
  uint32_t job = 0;
  // GPUs Slurm allocated to the job and its joined extensions; a range while a rescale is in
  // flight (a joining group may already be in the world, a leaving one already gone).
  int gpus_min = 0;
  int gpus_max = 0;
  int64_t batch_min = 1;  // the registered bounds (--elastic-batch), else [1, kNoBatchMax]
  int64_t batch_max = kNoBatchMax;
  // The batches the runtime may be running at: the job's batch and those of commands not yet
  // acknowledged. Empty: none known yet (any within the bounds).
  std::vector<int64_t> batches;
  std::optional<ProgressMark> previous;  // the last progress mark, if the window is still open
  double now = 0;

  static constexpr int64_t kNoBatchMax = int64_t{1} << 53;
};

struct MetricsFinding {
  MetricsRule rule;
  std::string field;
  std::string message;           // what was wrong and what elasticd did instead
  std::optional<double> used;    // a clamped value: what elasticd used
};

// What elasticd takes from the message.
struct MetricsVerdict {
  std::optional<int64_t> batch;  // the global batch
  // A step-time sample (all of gpus, local_batch, step_time_s plausible; step time after a clamp).
  struct Step {
    int gpus = 0;
    double local_batch = 0;
    double step_time_s = 0;
  };
  std::optional<Step> step;
  bool grad_stats_ok = false;         // grad_sqr and grad_var may be used (both present)
  std::optional<double> lr_factor;
  std::optional<ProgressMark> mark;   // the progress mark this message sets (nullopt: keep none)
  std::vector<MetricsFinding> refused;
  std::vector<MetricsFinding> clamped;

  // {"refused": [{"field", "rule", "message"}], "clamped": [{..., "used"}]}, each key only when
  // not empty: the reply's fields.
  nlohmann::json ReplyJson() const;
};

MetricsVerdict CheckMetrics(const MetricsReport& report, const MetricsExpectation& expect);

}  // namespace elastic::controller
