// The simulator on a cluster of several GPU types (elastic-sim --cluster FILE).
//
// Model (Sia's): a job runs on one GPU type at a time; its ground-truth step times on a type come
// from that type's measurement profile (placements-PROFILE.csv, scalability-PROFILE.csv), its
// training curves are the same on every type. Under the restart mechanism (HeteroConfig::rescale,
// the default, Sia's) any change of a running job's allocation (GPU count or type) is a
// checkpoint-restart that costs the job's stated restart time (Sia's measured cost per model,
// RestartCostS), and so are its first start and resuming after preemption. Under the stop-free
// mechanism (this project's: an extension's ranks join the running world, leavers go) a change
// of GPU count on the job's type pauses it grow_cost_s or shrink_cost_s; a start, a resume and a
// move to another type are still checkpoint-restarts (elasticd moves a job to another type
// through its checkpoint-requeue path). With Sia's calibration (HeteroConfig::sia_calibration) a job's true progress rate is
// divided by SiaSlowdown(app), as in Sia's simulator. Scheduling epochs, exact progress within an epoch and sticky placement within a
// type are those of Simulate() (simulator.h).
//
// Policies (HeteroConfig::policy):
//  - "sia": Sia's formulation. Per job, per (type, GPU count) its goodput (the type's oracle
//    throughput model x statistical efficiency, best batch) normalised by the job's smallest
//    goodput over all types; a configuration other than the current one has it multiplied by
//    Pollux's re-allocation factor with the cost of changing to it (ChangeCostS); the MIP minimises
//    sum_j x_jc * round(u_jc^p, 2) + lambda_n * (jobs left without GPUs), p = -0.5,
//    lambda_n = 1.1, GPU counts 1, 2, 4 and whole nodes. Solved exactly: the optimizer's
//    multiple-choice knapsack solver (SolveMckp), and CBC (SolveWithCbc) on any epoch where
//    that solver does not prove its plan optimal. A running job may be preempted (as in Sia),
//    except while its checkpoint-restore is under way: then it keeps its configuration (Sia's
//    hard constraint).
//  - "dp" (weights uniform or remaining = dp-srpt): the optimizer's dp policy on the same option
//    tables, the weighted-sum objective; type-aware. Running jobs keep >= their base size. With
//    HeteroConfig::exact its problem is solved to proven optimality as Sia's is.
//  - "pollux", "optimus" (and any other optimizer policy): type-unaware baselines. The policy sees
//    one pool of all GPUs whose speed is the reference type's (the first type of the cluster
//    file); the simulator then puts each job on one type: a running job stays on its type when
//    its new count fits there, other jobs (largest first) go to the type with the most free GPUs;
//    a job whose count fits no type gets what the freest type has left.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/simulator/application.h"
#include "elastic/simulator/cluster_file.h"
#include "elastic/simulator/simulator.h"
#include "elastic/simulator/workload.h"

namespace elastic::simulator {

// Per measurement profile (cluster-file PROFILE), the applications measured on it.
using TypedApps = std::map<std::string, AppTable>;

// The Pollux applications (epochs as LoadPolluxApplications) measured on each of `profiles`,
// from the Sia artifact's traces folder (traces/<app>/placements-PROFILE.csv, ...). Errors name
// the file.
Result<TypedApps> LoadTypedApplications(const std::string& traces_dir, const std::vector<std::string>& profiles);

// Sia's checkpoint-restart cost of a job of `app` [s] (measured on a physical cluster):
// deepspeech2 25, imagenet 250, cifar10 30, bert 120, yolov3 45, any other 30.
double RestartCostS(const std::string& app);

// The rescale mechanism's costs on several types.
struct ChangeCosts {
  RescaleMode mode = RescaleMode::kRestart;
  double grow_s = 1.0;    // stop-free: more GPUs on the same type
  double shrink_s = 0.1;  // stop-free: fewer GPUs on the same type
};

// What changing a job's allocation costs [s]: 0 when it keeps its type and GPU count or gets no
// GPUs; a start, a resume and a move to another type cost its restart cost; a resize on its type
// its restart cost under the restart mechanism, the grow or shrink pause under the stop-free one.
double ChangeCostS(const std::string& app, int from_type, int from_gpus, int to_type, int to_gpus,
                   const ChangeCosts& costs = {});

// Sia's calibration of its simulator to its physical cluster: a job's true goodput is divided by
// this (cifar10 1.8, ncf 1.5, imagenet, yolov3, bert and deepspeech2 1.2, any other 1).
double SiaSlowdown(const std::string& app);

struct HeteroConfig {
  ClusterSpec cluster;
  std::string policy = "sia";
  double period_s = 60.0;
  uint64_t seed = 1;
  JobWeights weights = JobWeights::kUniform;  // dp: kRemaining = dp-srpt
  // dp and the type-unaware optimizer policies: the objective as SimConfig's ("" = the policy's
  // own; "power-mean" with exponent p and the cost of a pending job, 0 = Sia's 1.1, < 0 =
  // Pollux's for the cluster). sia always uses Sia's.
  std::string objective;
  double p = -1.0;
  double pending_penalty = 0.0;
  double srpt_exponent = 0.5;
  double rescale_payback = 3.0;
  double time_budget_ms = 60000.0;
  // The optimizer policies: never preempt a running job (SimConfig's keep_running: -1 auto = all
  // but pollux, 0 off, 1 on). sia preempts as its own formulation does.
  int keep_running = -1;
  // The mechanism (ChangeCostS): restart (Sia's, the default) or stop-free (this project's).
  // Every policy's penalty for a change uses that change's cost under it.
  ChangeCosts rescale;
  // dp only: solve its problem to proven optimality (the MCKP solver, CBC where that solver's plan
  // is not proven optimal) instead of with the dp policy's own multi-type method.
  bool exact = false;
  // Sia's parameters.
  double sia_p = -0.5;
  double sia_lambda_n = 1.1;
  // Ground truth slowed down by SiaSlowdown() (as Sia's simulator does); off: the profiles as measured.
  bool sia_calibration = true;
  // Elastic bounds as SimConfig's.
  int elastic_max_gpus = 0;
  std::vector<std::string> rigid_apps = {"ncf"};
  double max_time_s = 60.0 * 86400.0;
  std::function<void(double, size_t, size_t)> progress;
};

struct HeteroStats {
  size_t solves = 0;
  size_t solved_by_mckp = 0;  // sia, exact dp: epochs whose plan the MCKP solver proved optimal
  size_t solved_by_cbc = 0;   // sia, exact dp: epochs solved by CBC instead
  size_t unproven = 0;        // sia, exact dp: epochs where CBC was needed and failed (the MCKP
                              // solver's plan was used)
  std::string cbc_error;      // the last such failure
  size_t inexact_solves = 0;  // optimizer policies: epochs whose plan has a gap > 1e-9
  double max_gap = 0.0;       // the largest such gap
  std::vector<int> moves;     // per job: moves to another GPU type
  std::vector<std::map<std::string, double>> gpu_seconds_by_type;  // per job
};

// Runs one simulation. kInvalidArgument for a bad configuration, an unknown policy or a job
// whose application lacks a profile; kInternal for an infeasible plan. Epochs where CBC was
// needed and failed are counted in HeteroStats::unproven.
Result<SimResult> SimulateHetero(const TypedApps& apps, const std::vector<JobSpec>& jobs, const HeteroConfig& config,
                                 HeteroStats* stats = nullptr);

}  // namespace elastic::simulator
