// Goodput models: throughput (samples/s) from a step-time model, statistical efficiency from
// gradient-noise statistics, goodput = throughput x efficiency, the best batch per GPU count,
// and a job's option table generated from all of this.
//
// Throughput models sit behind one interface: the Pollux step-time form fitted from observed
// samples (NLopt), or interpolation over measured profiles.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/optimizer/model.h"

namespace elastic::optimizer {

// Where a configuration runs: `gpus` replicas of type `gpu_type` over `nodes` nodes.
struct Placement {
  std::string gpu_type;
  int nodes = 1;
  int gpus = 1;
};

class ThroughputModel {
 public:
  virtual ~ThroughputModel() = default;
  // Seconds per optimizer step with `local_batch` samples per GPU per micro-step and
  // `accum_steps` extra micro-steps (gradient accumulation) before each synchronisation;
  // nullopt when the model has no prediction for this placement (e.g. an unknown type).
  virtual std::optional<double> StepTime(const Placement& placement, double local_batch, int accum_steps) const = 0;
};

// The Pollux step-time form. Compute T_c = alpha_c + beta_c * b; synchronisation
// T_n = alpha + beta * max(r - 2, 0) with (alpha_n, beta_n) across nodes or (alpha_r, beta_r)
// within one node, and 0 for one replica; one step = (T_c^gamma + T_n^gamma)^(1/gamma);
// accumulation adds accum_steps * T_c. Times in seconds, gamma in [1, 10].
struct PolluxParams {
  double alpha_c = 0.0;
  double beta_c = 0.0;
  double alpha_n = 0.0;
  double beta_n = 0.0;
  double alpha_r = 0.0;
  double beta_r = 0.0;
  double gamma = 1.0;
};

double PolluxStepTime(const PolluxParams& params, int nodes, int replicas, double local_batch, int accum_steps);

// One observed step (no accumulation): placement, local batch, measured step time [s].
struct StepSample {
  int nodes = 1;
  int gpus = 1;
  double local_batch = 1.0;
  double step_time = 0.0;
};

// Fits the Pollux parameters of one GPU type by bounded minimisation of the squared error of
// log step times (NLopt, derivative-free BOBYQA). Optimistic priors where data is missing:
// without multi-GPU samples the synchronisation terms are fixed at 0 (perfect scaling); without
// multi-node samples the cross-node terms equal the intra-node ones. kInvalidArgument when
// there is no sample or a sample is not positive. Samples of one configuration (nodes, GPUs,
// local batch) count as one point at their mean log step time, weighted by their number: the
// same minimiser, at the cost of one evaluation per configuration.
// Without warm_start: two starts (little and much overlap of compute and communication), the
// better fit kept. With warm_start (a previous fit of the same job): one local search from it,
// about a fifth of the evaluations; for a refit on samples that changed a little, not for a
// job's first fit or one after it ran at a new size (the previous optimum may be far).
Result<PolluxParams> FitPollux(const std::vector<StepSample>& samples,
                               const std::optional<PolluxParams>& warm_start = std::nullopt);

// Pollux step-time model per GPU type (types without parameters are not predicted).
class PolluxThroughput final : public ThroughputModel {
 public:
  explicit PolluxThroughput(std::map<std::string, PolluxParams> params) : params_(std::move(params)) {}
  std::optional<double> StepTime(const Placement& placement, double local_batch, int accum_steps) const override;
  const std::map<std::string, PolluxParams>& params() const noexcept { return params_; }

 private:
  std::map<std::string, PolluxParams> params_;
};

// Measured profiles per GPU type: step time is interpolated linearly in the local batch among
// the samples of the same GPU count (and node count when measured), then linearly in the GPU
// count between the two nearest measured counts. Outside the measured GPU counts: nullopt.
// Accumulation adds accum_steps times the compute share, estimated from the 1-GPU samples.
class ProfileThroughput final : public ThroughputModel {
 public:
  explicit ProfileThroughput(std::map<std::string, std::vector<StepSample>> profiles);
  std::optional<double> StepTime(const Placement& placement, double local_batch, int accum_steps) const override;

 private:
  std::optional<double> AtGpus(const std::vector<StepSample>& samples, int gpus, double local_batch) const;
  std::map<std::string, std::vector<StepSample>> profiles_;
};

// Gradient-noise statistics measured at the initial batch B0 (Pollux / McCandlish et al.).
struct EfficiencyParams {
  double init_batch = 1.0;  // B0
  double grad_sqr = 1.0;    // |g|^2, squared norm of the true gradient
  double grad_var = 0.0;    // tr(Sigma), gradient variance at B0
};

// E(B) = (var + sqr) / (var / s + sqr) / s with s = B / B0: the training progress per sample at
// batch B relative to B0 (1 at B0, in (0, 1] above it).
double StatisticalEfficiency(const EfficiencyParams& params, double batch);

// One batch choice of a configuration.
struct BatchChoice {
  int64_t batch = 0;        // global batch
  double local_batch = 0;   // per GPU per micro-step
  int accum_steps = 0;      // extra micro-steps
  double throughput = 0.0;  // samples/s
  double efficiency = 0.0;
  double goodput = 0.0;     // throughput x efficiency
};

class GoodputModel {
 public:
  GoodputModel(std::shared_ptr<const ThroughputModel> throughput, EfficiencyParams efficiency)
      : throughput_(std::move(throughput)), efficiency_(efficiency) {}

  // Goodput of `batch` on `placement` within the job's local-batch bounds (accumulation when
  // allowed and needed); nullopt when infeasible or not predictable.
  std::optional<BatchChoice> Evaluate(const Job& job, const Placement& placement, int64_t batch) const;
  // The best global batch for this placement: ~50 geometric candidates within the job's
  // global and local bounds (Pollux's search). nullopt when no batch is feasible.
  std::optional<BatchChoice> BestBatch(const Job& job, const Placement& placement) const;

  const ThroughputModel& throughput() const noexcept { return *throughput_; }
  const EfficiencyParams& efficiency() const noexcept { return efficiency_; }

 private:
  std::shared_ptr<const ThroughputModel> throughput_;
  EfficiencyParams efficiency_;
};

// The job's option table from its model: every allowed type and every allowed GPU count up
// to the type's capacity, each with its best batch; utility = goodput / goodput(base), where
// the base is min_gpus on the current type (running) or the first allowed type with a
// prediction. Nodes per count: whole-node packing, ceil(gpus / gpus_per_node).
// kInvalidArgument when the job has no model or no configuration can be predicted.
Result<std::vector<Option>> GenerateOptions(const Job& job, const Cluster& cluster);

}  // namespace elastic::optimizer
