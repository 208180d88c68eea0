// Horizontal fusion of a sweep (HFTA): K trials of the same model, each on one GPU, may be
// trained fused, w trials per GPU, as one wider model. A fusable sweep's configuration is then
// (GPUs, trials per GPU) instead of (GPUs, batch), and its worth comes from a fusion profile:
// how much one GPU trains when it carries w trials fused.
//
// Units: throughput is in trials: 1 = one trial training alone on one GPU (its base
// configuration), so a sweep's option utility is directly comparable with that of K separate
// one-GPU jobs (K of them on K GPUs are worth K).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/optimizer/model.h"

namespace elastic::optimizer {

// speedup[w - 1]: the trials' combined throughput when w of them train fused on one GPU, relative
// to one trial alone on that GPU (the HFTA paper's "throughput vs one job per GPU", up to 15.1x
// there). speedup[0] is 1 (a trial alone is not fused); the table's length is the widest fusion
// the profile allows (memory, or what was measured). Each trial of a GPU with w trials trains
// at speedup[w - 1] / w of its speed alone.
struct FusionProfile {
  std::string name;
  std::vector<double> speedup;

  int max_width() const noexcept { return static_cast<int>(speedup.size()); }
  double Speedup(int width) const noexcept { return width < 1 || width > max_width() ? 0.0 : speedup[width - 1]; }
};

// kInvalidArgument unless the table is non-empty, speedup[0] == 1 and every entry is finite and
// in (0, w].
Status ValidateFusionProfile(const FusionProfile& profile);

// A profile from measured points (width, speedup), width 1 implied as 1: linear between the
// points, the widest point is the widest width. kInvalidArgument for an empty list, widths < 1
// or unsorted, or a speedup out of (0, w].
Result<FusionProfile> ProfileFromPoints(std::string name, const std::vector<std::pair<int, double>>& points);

// The profiles measured by this project (docs/optimizer.md, "Fused sweeps"), by name:
//  cpu-mlp: tests/python/bench_fused.py, the MLP 64-128-10 at batch 64, one CPU core, fused vs
//           separate processes: K = 2, 4, 8, 16 -> 0.86, 1.38, 1.77, 2.39 (docs/results.md);
//  cpu-cnn: the same benchmark's small CNN: 1.08, 1.27, 1.52, 1.39.
// kNotFound naming the known profiles.
Result<FusionProfile> BuiltinFusionProfile(std::string_view name);
// "cpu-mlp, cpu-cnn"
std::string BuiltinFusionProfileNames();

// "W:S,W:S,..." (e.g. "2:1.9,4:3.5,8:6") through ProfileFromPoints, or a built-in name.
Result<FusionProfile> ParseFusionProfile(std::string_view text);

// A profile from a model's measured one-GPU step time T(local batch): w trials of local batch b
// fused cost one step of the w-times wider batch, speedup(w) = w T(b) / T(w b), for every w with
// w b <= max_local_batch (the largest batch measured to fit on one GPU), at most max_width.
// `step_time` must be positive at every batch asked for.
template <class StepTime>
FusionProfile ProfileFromStepTimes(std::string name, StepTime step_time, double local_batch, double max_local_batch,
                                   int max_width) {
  FusionProfile p;
  p.name = std::move(name);
  p.speedup.push_back(1.0);
  const double t1 = step_time(local_batch);
  for (int w = 2; w <= max_width && w * local_batch <= max_local_batch; ++w) {
    const double s = w * t1 / step_time(w * local_batch);
    p.speedup.push_back(std::min(static_cast<double>(w), s));
  }
  return p;
}

// One way to run a sweep: `gpus` GPUs, `trials` of its trials running, per_gpu[g] of them on GPU
// g (1..width each, widest first).
struct FusedChoice {
  int gpus = 0;
  int width = 0;  // the most trials on one GPU
  int trials = 0;
  std::vector<int> per_gpu;
  double throughput = 0.0;  // sum over the GPUs of Speedup(per_gpu[g]), in trials
};

// For every GPU count G = 1..min(trials, max_gpus), the best choice on exactly G GPUs: at most
// `trials` trials, 1..W per GPU (W = profile.max_width(), at most `max_width` when > 0), the
// largest total throughput (a DP over GPUs and trials: uneven spreads win where the profile is
// not concave); on ties the fewest trials. Empty for trials < 1 or max_gpus < 1.
std::vector<FusedChoice> SweepChoices(const FusionProfile& profile, int trials, int max_gpus, int max_width = 0);

// The sweep's option table for the optimizer: one Option per choice above (batch 0: the trials
// keep their own batch), utility = the choice's throughput in trials. Every policy solves it as
// it solves any job's table; FusedChoiceFor maps the chosen GPU count back to the choice.
std::vector<Option> SweepOptions(const std::vector<FusedChoice>& choices, const std::string& gpu_type);
// The choice on `gpus` GPUs, or nullptr.
const FusedChoice* FusedChoiceFor(const std::vector<FusedChoice>& choices, int gpus);

}  // namespace elastic::optimizer
