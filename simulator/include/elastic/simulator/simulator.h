// The discrete-event simulator: a cluster of GPU nodes, job arrivals from a workload, a
// scheduling epoch every `period_s` with an optimizer policy in the loop, ground-truth progress
// from the application profiles, and a rescale cost model.
//
// Time advances in scheduling epochs. At t = 0, P, 2P, ... the policy sees every job that has
// arrived and not finished (running or pending) and returns a plan; the simulator places it
// (sticky: running jobs keep their nodes), charges the rescale costs, then advances every job
// for P seconds. Inside an epoch a job's progress is exact: its goodput is recomputed at every
// training-epoch boundary (gradient statistics change per epoch) and it finishes at the exact
// moment its progress reaches the target; its GPUs stay idle until the next scheduling epoch
// (as in the Pollux artifact simulator).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/simulator/application.h"
#include "elastic/simulator/sweeps.h"
#include "elastic/simulator/workload.h"

namespace elastic::simulator {

enum class RescaleMode {
  kRestart,   // every change of a running job's GPUs is a checkpoint-restart (restart_cost_s)
  kStopFree,  // grow and shrink without stopping (grow_cost_s / shrink_cost_s pauses)
};

// What the optimizer's goodput models are fed from.
enum class ModelSource {
  kOracle,    // the Pollux step-time form fitted once on the application's whole profile
  kObserved,  // fitted on the job's own observed step times (as a controller would); before a
              // job has run it is offered 1 GPU only, and at most twice its largest observed
              // GPU count (Pollux's exploration rule)
};

// The weight of each job in the optimizer's objective.
enum class JobWeights {
  kUniform,    // 1 for every job
  kRemaining,  // (1 / the job's remaining time at its base size, in hours, as the optimizer's
               // model predicts it from its progress)^srpt_exponent: Smith's rule, tempered, for
               // average JCT; and the rescale penalty on the remaining time (rescale_payback)
};

struct SimConfig {
  int nodes = 16;
  int gpus_per_node = 4;
  std::string gpu_type = "t4";
  double period_s = 60.0;  // scheduling epoch

  // Policy: an optimizer policy name (optimizer::PolicyNames()) or
  // "fifo" (rigid requests, FIFO with EASY backfill, then the static policy places them).
  std::string policy = "dp";
  std::string objective = "";  // "" = the policy's default (weighted-sum; pollux: power-mean)
  double p = -1.0;
  // Power mean only: what a pending job costs (0: the objective's default, Sia's 1.1; < 0: Pollux's,
  // PolluxPendingPenalty of the simulated cluster). The pollux policy uses Pollux's unless an
  // objective is given.
  double pending_penalty = 0.0;
  // Batch: elastic (the optimizer chooses it) or frozen at the user's request (Saxena's
  // baseline; optimus, static and fifo always freeze it).
  bool batch_frozen = false;
  // Running jobs are never preempted (the controller's setting). -1: policy default (on for
  // every policy except pollux, which may preempt as in the Pollux artifact).
  int keep_running = -1;
  double time_budget_ms = 60000.0;  // per solve; large so that searches end on their own counts
  uint64_t seed = 1;
  JobWeights weights = JobWeights::kUniform;
  ModelSource model = ModelSource::kOracle;

  RescaleMode rescale = RescaleMode::kRestart;
  double restart_cost_s = 30.0;  // checkpoint-restart (also: resuming a preempted job)
  double grow_cost_s = 1.0;      // stop-free grow pause (elastic_mpi benchmark)
  double shrink_cost_s = 0.1;    // stop-free shrink pause
  double start_cost_s = 30.0;    // first start of a job (launch, load), both modes
  // Rescale penalty in the optimizer's objective (Pollux): <0 = the mode's cost (restart cost,
  // or the grow cost when stop-free).
  double penalty_cost_s = -1.0;
  // JobWeights::kRemaining only (the optimizer's Objective::srpt_exponent and rescale_payback):
  // weights (1 / remaining hours)^srpt_exponent, and a rescale must save rescale_payback times
  // its cost over the job's remaining run. Chosen by the sweep in docs/results.md.
  double srpt_exponent = 0.5;
  double rescale_payback = 3.0;

  // Elastic bounds: min 1 GPU; max = min(cluster, max_batch / min_local_batch, this) (0: no
  // extra cap). Jobs of `rigid_apps` stay at 1 GPU (Pollux pins ncf).
  int elastic_max_gpus = 0;
  std::vector<std::string> rigid_apps = {"ncf"};

  // Fused sweeps (HFTA; docs/simulator.md, "Fused sweeps"): 0 = off, every job runs on its own
  // GPUs (the results without it are those of a simulator without fusion). > 0: the jobs that
  // GroupSweeps(sweep_rule) groups (sweeps.h) are the trials of fusable sweeps; each sweep is one
  // job to the optimizer, its choice (GPUs, trials per GPU) with at most this many per GPU, its
  // value from a fusion profile. Trials keep their requested batch and one GPU (or a share).
  int fuse_max_per_gpu = 0;
  SweepRule sweep_rule;
  // The profile: "" = each model's own, from its measured one-GPU step times at the trials' batch
  // (optimizer::ProfileFromStepTimes); else a built-in name or a W:S list
  // (optimizer::ParseFusionProfile).
  std::string fuse_profile;

  double max_time_s = 60.0 * 86400.0;  // stop simulating here (unfinished jobs are reported)
  // Called after every scheduling epoch with (simulated time, jobs finished, jobs in total).
  std::function<void(double, size_t, size_t)> progress;
};

struct JobResult {
  std::string name;
  std::string app;
  double arrival_s = 0.0;
  double start_s = -1.0;   // first time it got GPUs (-1: never)
  double finish_s = -1.0;  // -1: not finished by max_time_s
  double gpu_seconds = 0.0;
  int rescales = 0;       // changes of GPU count after the start (preemption included)
  int max_gpus_used = 0;
  int64_t last_batch = 0;
  bool finished() const { return finish_s >= 0.0; }
  double jct() const { return finish_s - arrival_s; }
};

struct EpochRecord {
  double time_s = 0.0;
  int gpus_allocated = 0;
  int jobs_running = 0;
  int jobs_pending = 0;
  double solve_ms = 0.0;
};

struct SimResult {
  std::vector<JobResult> jobs;
  std::vector<EpochRecord> epochs;
  int total_gpus = 0;
  double end_s = 0.0;
  double solve_ms_total = 0.0;
  double wall_ms = 0.0;
};

// Runs one simulation. Every spec's application must be in `apps`. kInvalidArgument for a bad
// configuration or an unknown policy; kInternal when a policy returns an infeasible plan.
Result<SimResult> Simulate(const AppTable& apps, const std::vector<JobSpec>& jobs, const SimConfig& config);

// Every job alone on the empty cluster, arriving at its own time: each job's JCT without any
// other job under the same policy and costs (close to a lower bound: alone it still pays its own
// rescales), and how many jobs could finish by a horizon. Epoch records are left empty.
Result<SimResult> SimulateIsolated(const AppTable& apps, const std::vector<JobSpec>& jobs, const SimConfig& config);

}  // namespace elastic::simulator
