// Application profiles: the ground truth of the simulator. For one model (cifar10, bert, ...)
// the measured step times per placement and local batch (placements.csv, scalability.csv) and
// the training curves with gradient-noise statistics per validated global batch
// (validation-<B>.csv), read the way the Pollux artifact simulator reads them
// (../shared/data/README.md).
//
// Units: times in seconds; batches in samples; progress in "initial-batch steps" (the
// validation files' `progress` column: one step at the initial batch B0 adds 1).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/optimizer/goodput.h"

namespace elastic::simulator {

// One measured point: local batch -> step time and the synchronisation part of it.
struct StepPoint {
  double local_batch = 0.0;
  double step_time = 0.0;
  double sync_time = 0.0;
};

// One row of a validation-<B>.csv file.
struct CurvePoint {
  double progress = 0.0;
  double iteration = 0.0;
  double grad_sqr = 0.0;
  double grad_var = 0.0;
};

struct StepTimes {
  double step = 0.0;  // one synchronised step [s]
  double sync = 0.0;  // its synchronisation part [s]
};

struct GradStats {
  double sqr = 0.0;
  double var = 0.0;
};

class Application {
 public:
  std::string name;
  int max_epochs = 1;          // the job is done after this many epochs
  int64_t init_batch = 1;      // B0: smallest validated batch
  int64_t max_batch = 1;       // largest validated batch
  int64_t min_local_batch = 1;  // smallest measured local batch
  int64_t max_local_batch = 1;  // largest measured local batch (or an override)

  // Measured placements: key = digit string normalised to its smallest rotation.
  std::map<std::string, std::vector<StepPoint>> placements;
  // Means per (nodes, replicas) over placements plus scalability.csv rows.
  std::map<std::pair<int, int>, std::vector<StepPoint>> grid;
  // Training curves per validated global batch.
  std::map<int64_t, std::vector<CurvePoint>> curves;

  // The optimizer's "oracle" throughput model: the Pollux form fitted once on every measured
  // point (set by Finalize()).
  optimizer::PolluxParams oracle_fit;

  // Sorts and averages the tables, sets the derived bounds and fits oracle_fit. Call once
  // after filling the tables. kInvalidArgument when a table is empty or inconsistent.
  Status Finalize(int epochs, int64_t max_local_batch_override = 0);

  // Ground-truth step time of `gpus_per_node` (GPUs on each used node, any order; zeros are
  // ignored) at `local_batch` per GPU: the normalised placement when measured (linear in the
  // local batch, clamped to the measured range), else linear over (nodes, replicas) on the grid
  // (nodes capped at 16).
  StepTimes StepTime(const std::vector<int>& gpus_per_node, double local_batch) const;
  // Gradient statistics during epoch `epoch` (0-based) at global batch `batch`, linear between
  // the two nearest validated batches (clamped outside them).
  GradStats Stats(double batch, int epoch) const;
  // Progress after `epoch` complete epochs (0 for 0): the smallest over the curves.
  double ProgressAt(int epoch) const;
  double TargetProgress() const { return ProgressAt(max_epochs); }
  // Iterations to finish at validated batch `batch` (for the workload request rules).
  double IterationsToFinish(int64_t batch) const;
};

// Normalises a placement to the lexicographically smallest rotation of its non-zero digits
// ("2111" -> "1112"). Counts above 9 are written in decimal (no such key is ever measured).
std::string NormalisePlacement(const std::vector<int>& gpus_per_node);

// Reads one application folder (placements.csv, scalability.csv, validation-*.csv).
// Errors name the file and line: "DIR/placements.csv:3: expected 4 fields, got 2".
// A non-empty `profile` reads the step times of that GPU type instead: placements-PROFILE.csv
// and scalability-PROFILE.csv (the Sia artifact's per-type files; the training curves are
// the same on every type).
Result<std::shared_ptr<const Application>> LoadApplication(const std::string& dir, const std::string& name,
                                                           int epochs, int64_t max_local_batch_override = 0,
                                                           const std::string& profile = "");

// The six Pollux applications with the artifact's epochs (bert 2, cifar10 100, ncf 10,
// imagenet 90, deepspeech2 80, yolov3 50 with max local batch 8): their folder names under a
// traces directory (the Pollux and the Sia artifacts alike), epochs to finish, and the maximum
// local batch where the artifact's placements allow more than the model does (0: as measured).
struct AppSpec {
  const char* name;
  int epochs;
  int64_t max_local;
};
const std::vector<AppSpec>& PolluxAppSpecs();

// Those six from `traces_dir`.
using AppTable = std::map<std::string, std::shared_ptr<const Application>>;
Result<AppTable> LoadPolluxApplications(const std::string& traces_dir);

}  // namespace elastic::simulator
