// Where step metrics go. The session calls the sink on rank 0 after each reported step; the
// controller client (a later addition) is one more sink. Sinks must not call MPI.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace elastic::mpi {

// One step's figures, as the `metrics` message of docs/interfaces.md section 3 carries them.
struct StepMetrics {
  std::uint64_t step = 0;          // steps completed by the job
  int gpus = 0;                    // world size (ranks)
  std::uint64_t global_batch = 0;  // samples per step, whole world
  std::uint64_t local_batch = 0;   // samples per step on rank 0
  int accum_steps = 1;             // gradient-accumulation steps per optimizer step
  double step_time_s = 0;          // wall time of the step, seconds
  double grad_sqr = 0;             // smoothed |g|^2 (0 while unknown)
  double grad_var = 0;             // smoothed tr(Sigma), per sample (0 while unknown)
  std::uint64_t samples = 0;       // samples processed by the job so far (progress)
  double lr_factor = 1;            // current learning-rate factor
};

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // Called on rank 0 only, from the training thread. Must not throw.
  virtual void OnStep(const StepMetrics& metrics) noexcept = 0;
  // Called on rank 0 after each rescale: what changed and how long the pause was (seconds).
  virtual void OnRescale(const std::string& what, int world_size, double pause_s) noexcept = 0;
};

// Appends one JSON object per line to a file (the file is opened on construction, append mode;
// an unopenable path is reported once as a warning and the sink then drops everything).
std::shared_ptr<MetricsSink> MakeJsonLinesSink(const std::string& path);

}  // namespace elastic::mpi
