// What elasticd knows of one elastic job's speed and statistical efficiency, and what it derives
// from that: the option table (GPU count -> best global batch and utility), the gain of a batch
// change at the job's current size, and the job's time left. The rules are explained in
// docs/admin-guide.md ("How elasticd sizes a job").
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "registry.h"
#include "elastic/optimizer/goodput.h"
#include "elastic/optimizer/model.h"

namespace elastic::controller {

// The runtime's gradient-noise statistics (metrics `grad_sqr` = |g|^2 and `grad_var` = tr(Sigma),
// the per-sample gradient variance; docs/interfaces.md section 3) as the efficiency model's
// parameters at B0 = base_batch: the variance of the gradient of a batch of B0 samples is
// tr(Sigma) / B0. nullopt when nothing was measured (grad_var <= 0: the estimator needs two
// ranks), when a value is not finite, when base_batch <= 0, and when grad_sqr is 0: the runtime
// clamps a negative estimate of |g|^2 to 0 (the signal is below what the estimator resolves),
// which bounds the noise scale from below only; taken as a value it would make every batch look
// perfectly efficient and send the batch to its maximum. The runtime's own noise scale is
// undefined there too; the controller keeps its last estimate.
std::optional<optimizer::EfficiencyParams> EfficiencyFromMetrics(double grad_sqr, double grad_var, double base_batch);

// The job's step-time samples as far as physics allows them, judged by its own fastest samples at
// fewer GPUs or smaller local batches: a step with more GPUs and at least as large a local batch,
// or with the same GPUs and a larger local batch, is never faster; and with more GPUs and a
// smaller local batch, a GPU never trains more samples per second. A sample that claims otherwise
// (a super-linear speed-up) has its step time raised to the bound: its speed-up counts as linear.
// Samples that obey these rules come back unchanged. The model is fitted on these (JobOptions).
std::vector<optimizer::StepSample> PlausibleSamples(const std::vector<optimizer::StepSample>& samples);

// The gradient noise scale tr(Sigma) / |g|^2 of p (McCandlish et al.: the batch at which noise and
// signal are equal); +inf when grad_sqr is 0 (never from EfficiencyFromMetrics).
double NoiseScale(const optimizer::EfficiencyParams& p);

// Whether elasticd chooses the job's global batch: only when the job gave --elastic-batch bounds.
// Without them the batch stays the program's own and only the GPU count changes.
bool BatchElastic(const ElasticJob& job);

// The number of GPU counts the job's step-time samples were measured at (its model needs two).
int MeasuredSizes(const ElasticJob& job);

// The mean time between two fits of one job's step-time model while it reports metrics. Each
// fit's staleness comes after a period drawn from 0.75-1.25 times this (fixed by the job and the
// fit): fits made in one epoch do not all go stale in the same later epoch.
constexpr double kRefitPeriodS = 300;

// Why a job's step-time model should be fitted now; the first the most urgent.
enum class FitNeed {
  kNone,         // it has run at one size only, or its fit is recent, or nothing arrived since
  kNewSize,      // never fitted, or it has run at a size its fit has not seen
  kMoreSamples,  // twice the samples its fit saw
  kStale,        // its fit's refit time passed, and metrics arrived since the fit
};
FitNeed FitDue(const ElasticJob& job, double now);

// Fits the job's step-time model now, on PlausibleSamples, and sets when it goes stale. A refit
// at the sizes its last fit saw starts from that fit (FitPollux's warm start, about a fifth of
// the work); a first fit, or one after a new size, starts cold. A failed fit leaves no model (the
// prior) until the next one. `now` in Unix seconds. model_refits.h decides when it runs.
void FitModel(const ElasticJob& job, double now);

// The job's option table for GPU counts from its base to max_gpus (in its GPU steps): from its
// goodput model once it has run at two sizes and has a fit (FitModel; utility = goodput /
// goodput at the base size, the batch the best for that count), else the optimistic prior
// (near-linear speed-up, the current batch). Fits nothing: the model is the job's last fit,
// however old.
// A job's claimed speed-up never exceeds what its measurements support: the model is fitted on
// PlausibleSamples, and its step time at n GPUs is never below its base size's at the same local
// batch: at most linear scaling (docs/admin-guide.md, "How elasticd sizes a job").
std::vector<optimizer::Option> JobOptions(const ElasticJob& job, int max_gpus, int gpus_per_node);

// Goodput at `gpus` with global batch to_batch over that with from_batch, from the job's model
// (its last fit); nullopt without a model or when either batch is not feasible there.
std::optional<double> BatchGain(const ElasticJob& job, int gpus, int gpus_per_node, int64_t from_batch,
                                int64_t to_batch);

// Whether a job that keeps its size (`gpus`) should change its global batch to target_batch: the
// batch is the model's to choose, the job may change now (not frozen), and the model promises at
// least min_gain (0.05: 5 %) more goodput at target_batch than at the current batch. Sets
// decision["action"] to "batch" or "stay" and, when the model was asked, decision["gain"].
bool DecideBatchChange(const ElasticJob& job, int gpus, int64_t target_batch, bool frozen, int gpus_per_node,
                       double min_gain, nlohmann::json& decision);

// Seconds of training the job has left at its current size: its samples still to train at the
// speed of its last step-time sample, less the time since that sample arrived. nullopt when
// unknown (no training goal, or no step-time sample yet).
std::optional<double> TimeLeftAtCurrentSize(const ElasticJob& job, double now);

}  // namespace elastic::controller
