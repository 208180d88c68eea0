// Model types of the epoch optimizer: the cluster, the jobs, their candidate configurations
// (options) and the plan a policy returns.
//
// Units: GPU counts are whole GPUs; batch sizes are samples; times are seconds unless a name
// says otherwise (solve_ms). Utilities are dimensionless (a job's goodput relative to its base
// configuration); the objective multiplies them by the job's weight.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::optimizer {

class GoodputModel;  // goodput.h

// The largest Job::remaining_s a snapshot may carry (about 32 years); producers clamp to it.
inline constexpr double kMaxRemainingInputS = 1e9;

// One homogeneous pool of GPUs: `nodes` nodes with `gpus_per_node` GPUs each.
struct GpuType {
  std::string name;
  int nodes = 0;
  int gpus_per_node = 0;
  int capacity() const noexcept { return nodes * gpus_per_node; }
};

struct Cluster {
  std::vector<GpuType> types;

  // Index of the type called `name`, or -1.
  int TypeIndex(const std::string& name) const noexcept;
  int TotalGpus() const noexcept;
};

// A job's configuration: what it runs on (or would run on).
struct Configuration {
  std::string gpu_type;
  int gpus = 0;
  int64_t batch = 0;  // global batch size (samples per optimizer step)
  bool operator==(const Configuration&) const = default;
};

// One candidate configuration of a job with its utility (relative goodput, unweighted).
struct Option {
  std::string gpu_type;
  int gpus = 0;
  int64_t batch = 0;
  double utility = 0.0;
};

enum class JobState { kPending, kRunning };

struct Job {
  std::string id;
  std::string owner;
  std::string account;
  double weight = 1.0;  // > 0; multiplies the job's utility in the objective
  JobState state = JobState::kPending;

  int min_gpus = 1;  // the base size; a running job never goes below it
  int max_gpus = 1;
  int gpu_step = 1;  // GPU counts are min_gpus + k * gpu_step (model-parallel group size)
  std::vector<std::string> allowed_types;  // empty: every type of the cluster

  int64_t min_batch = 1;  // global batch bounds (batch 0 in an option means "unspecified")
  int64_t max_batch = INT64_MAX;
  int64_t min_local_batch = 1;  // per-GPU (micro-)batch bounds
  int64_t max_local_batch = INT64_MAX;
  bool accumulation = false;  // gradient accumulation allowed (local batch x steps)

  std::optional<Configuration> current;  // set for running jobs
  double age_s = 0.0;                     // time since the job started (or was submitted)
  int rescales = 0;                       // how many times it was resized so far
  // Estimated run time left at the base configuration [s] (0: unknown; at most
  // kMaxRemainingInputS). Only objectives that ask for it use it (Objective::srpt_exponent,
  // rescale_payback; the optimus policy).
  double remaining_s = 0.0;

  // Either an explicit option table or a goodput model (or both: the table wins).
  std::vector<Option> options;
  std::shared_ptr<const GoodputModel> model;

  // True when `gpus` is within [min_gpus, max_gpus] and on the job's GPU step.
  bool GpuCountAllowed(int gpus) const noexcept;
  bool TypeAllowed(const std::string& type) const noexcept;
};

// Everything a policy sees at one epoch.
struct Snapshot {
  Cluster cluster;
  std::vector<Job> jobs;
};

// Checks the snapshot's internal consistency (positive capacities, unique ids, sane bounds,
// options on known types). Returns kInvalidArgument with a message naming the first problem.
Status Validate(const Snapshot& snapshot);

// GPUs of one node given to one job.
struct NodeSlice {
  int node = 0;  // index of the node within its GPU type
  int gpus = 0;
};

struct Assignment {
  std::string job_id;
  bool pending = true;  // true: the job gets nothing this epoch
  std::string gpu_type;
  int gpus = 0;
  int64_t batch = 0;
  double utility = 0.0;              // the chosen option's utility (0 when pending)
  std::vector<NodeSlice> placement;  // filled by Place() (placement.h)
};

// A policy's answer. `objective` is the value of the plan under the policy's objective;
// `bound` is a proven upper bound on the optimum of the same problem (equal to objective
// when the plan is proven optimal; +inf when the policy proves nothing); gap = (bound -
// objective) / |bound|.
struct Plan {
  std::string policy;
  std::string method;  // how it was solved, e.g. "exact-dp", "lp-core-dp", "lagrangian-dp"
  std::vector<Assignment> assignments;  // one per job, in the snapshot's order
  double objective = 0.0;
  double bound = 0.0;
  double gap = 0.0;
  double solve_ms = 0.0;
  bool exact = false;
};

// Checks that a plan respects the cluster's capacity per type and every job's GPU bounds,
// step, allowed types and batch bounds. kInvalidArgument naming the first violation.
Status CheckPlan(const Snapshot& snapshot, const Plan& plan);

}  // namespace elastic::optimizer
