// The registry: what elasticd knows of the elastic jobs it manages (ElasticJob) and of their
// extension jobs (Extension), and the life cycle of an extension as one table of allowed state
// transitions. States are an enum inside elasticd; their names exist only where they leave it
// (the state database, status replies, audit records), and are the same names as always.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "elastic/common/job_spec.h"
#include "elastic/optimizer/goodput.h"
#include "elastic/optimizer/model.h"
#include "metrics_check.h"

namespace elastic::controller {

// Unix seconds (the registry's and the database's time stamps).
double Now();

struct ElasticJob {
  uint32_t id = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string user;
  std::string account;
  std::string partition;
  std::string gpu_type;
  int base_gpus = 0;
  nlohmann::json spec = nlohmann::json::object();  // gpus_min, gpus_max, gpu_step, batch_*, lr_scaling, model
  std::string state = "running";                   // running | ended | moving (requeued by elasticd for a move)
  // The first node of its allocation as the last epoch saw it (its leader runs there); not stored.
  std::string leader_node;
  std::string init_token;
  nlohmann::json launcher;  // argv, cwd, env, rendezvous_uri, topology, grows_onto (null until the launcher reported)
  bool paused = false;
  double registered_at = 0;
  double last_rescale_at = 0;
  int rescales = 0;
  int64_t batch = 0;          // last reported global batch
  int next_group = 1;
  double grow_backoff_until = 0;  // no new growth before this time (after a failed extension)
  int64_t metrics_received = 0;   // metrics messages accepted for this job (load tests count them)
  // Progress toward the job's training goal (metrics `samples`, `total_samples`; 0: unknown):
  // with the last step-time sample's speed, the remaining-time objective's inputs.
  int64_t samples_done = 0;
  int64_t total_samples = 0;
  double metrics_at = 0;      // when the last metrics message arrived (0: none yet)
  double lr_factor = 1.0;     // the runtime's learning-rate factor at its current batch (metrics, ack)
  // The global batch the last plan chose for each GPU count the job may reach while it grows
  // (its options'): a grow command carries the batch of the size that group brings the job to.
  std::map<int, int64_t> grow_batch;
  int64_t batch_command = 0;  // a set_batch command not yet acknowledged (0: none), queued at batch_command_at
  double batch_command_at = 0;
  std::vector<optimizer::StepSample> samples;  // recent step-time observations, on gpu_type
  // Across GPU types (type_moves.h): the speed per GPU at the base size measured on each type it
  // ran on (samples/s per GPU), and the samples of the types it left (its fit is per type).
  std::map<std::string, double> type_speed;
  std::map<std::string, std::vector<optimizer::StepSample>> samples_by_type;
  // A move to another GPU type past its checkpoint (moves.cpp): {from, to, phase, started_at,
  // check}; null when none. Stored so that a restarted elasticd finishes the move.
  nlohmann::json move;
  std::optional<optimizer::EfficiencyParams> efficiency;
  MetricsTrust trust;  // what the plausibility check of its metrics keeps (metrics_check.h)
  // The leader of a fused sweep (fused_sweep.h): {"array_job", "task", "trials": [task indexes],
  // "held": [tasks elasticd holds for it], "done": {task: trial-steps}}; null for other jobs.
  nlohmann::json fuse;
  // The step-time model fitted from `samples` (persisted with the job record at its next save, so
  // that a restarted elasticd plans with it at once and refits only what FitDue says). Fitting
  // is the costly part of an epoch: model_refits.h chooses the jobs fitted in each epoch, within
  // scheduler.fit_budget_ms; the others keep their last fit (or the prior) until their turn.
  // A fit is due when the job ran at a new size, has twice the samples it was fitted on, or its
  // fit is stale (refit_at passed, and metrics arrived since: FitDue, job_model.h).
  mutable std::optional<optimizer::PolluxParams> fit;
  mutable uint64_t fit_generation = 0;  // fits made (0: never fitted); the option table's cache key
  mutable size_t fit_samples = 0;
  mutable size_t fit_sizes = 0;
  mutable int64_t fit_metrics = 0;      // metrics_received at the fit: equal now, the samples are too
  mutable double fit_at = 0;
  mutable double refit_at = 0;          // when the fit goes stale: fit_at + a jittered refit period
  mutable double fit_wanted_since = 0;  // when its pending fit became due (0: none pending)
  // The option table of the last epoch, reused while its inputs are the same (plan_input.cpp).
  mutable std::optional<std::vector<optimizer::Option>> options_cache;
  mutable std::tuple<int, int, uint64_t, int64_t, int, int> options_key{};
  mutable double options_at = 0;

  nlohmann::json ToJson() const;
  static ElasticJob FromJson(const nlohmann::json& j);
  // The stored `spec` as the job contract reads it (tolerant: a missing or mistyped key is absent).
  contract::JobSpec Spec() const { return contract::JobSpec::FromJson(spec); }
  // Its runtime can add ranks only on the node of its node group 0 (the launcher said
  // "grows_onto": "leader_node": Open MPI 5's DVM); extensions then go to that node only. Any
  // value but "any_node" restricts (a state database may hold "job_nodes" of an earlier version).
  bool GrowsOnLeaderNodeOnly() const {
    return launcher.is_object() && launcher.value("grows_onto", "any_node") != "any_node" && !GrowsByRelaunch();
  }
  // Its runtime adds ranks in place on the leader's node only, and reaches other nodes by a
  // relaunch (the launcher said "grows_onto": "relaunch": Open MPI 5's DVM, docs/runtime.md
  // "Relaunch"): growth stays in place while every extension is on that node; an extension on
  // another node, and every one after it while such a one is in the world, joins by a relaunch
  // (relaunch_world.h).
  bool GrowsByRelaunch() const { return launcher.is_object() && launcher.value("grows_onto", "") == "relaunch"; }
  // The groups that joined (or are to join) by relaunch: their launchers hold their node and
  // start no ranks; the world is started again over it. Persisted with the job.
  std::set<int> relaunch_groups;
};

// An extension's life: submitting (the intent, before Slurm knows it) -> submitted (released in
// Slurm) -> registered (its batch step reached elasticd) -> joining (a grow command queued) ->
// joined -> leaving (a shrink command queued) -> left; failed and cancelled end it early.
// `ready` is a state the schema has always named and Active() counts, but which elasticd does
// not enter; a record holding it still loads.
enum class ExtState {
  kSubmitting,
  kSubmitted,
  kRegistered,
  kReady,
  kJoining,
  kJoined,
  kLeaving,
  kLeft,
  kFailed,
  kCancelled,
};

// The name stored in the state database and shown by status ("submitting", ...).
std::string_view ExtStateName(ExtState s);
// The state of a stored name; nullopt for a name elasticd never wrote.
std::optional<ExtState> ParseExtState(std::string_view name);
// Whether the table allows `from` -> `to` (a state to itself is no transition and always allowed).
bool ExtTransitionAllowed(ExtState from, ExtState to);

struct Extension {
  int64_t id = 0;
  uint32_t parent = 0;
  int group = 0;
  uint32_t slurm_job = 0;
  std::string node;
  std::string gpu_type;
  int gpus = 0;
  std::string account;
  std::string token;
  ExtState state = ExtState::kSubmitting;
  double created_at = 0;
  double joined_at = 0;
  // When its shrink command was queued (state leaving; 0 otherwise). Not a column of its own: on
  // load it is the request time of the group's last shrink in the rescales table.
  double leaving_at = 0;
  // When its grow command was queued (state joining; 0 otherwise): the join or relaunch under way
  // has extensions.ready_timeout from then. On load: the request time of the group's last grow.
  double joining_at = 0;
  bool Active() const;    // holds (or is about to hold) GPUs for its parent
  bool InFlight() const;  // not yet joined, or leaving
  bool InWorld() const;   // its ranks are part of the parent's world: joined or leaving
  // Moves to `to` when ExtTransitionAllowed says so; otherwise logs the refused transition (the
  // one place that does) and keeps the state. Returns whether it moved.
  bool MoveTo(ExtState to);
};

// The running elastic jobs and their non-final extensions (ended ones stay in the database only).
struct Registry {
  std::map<uint32_t, ElasticJob> jobs;
  std::map<int64_t, Extension> extensions;

  int CurrentGpus(const ElasticJob& job) const;  // base + extensions in its world
  int PlannedGpus(const ElasticJob& job) const;  // base + every active extension not leaving
  // The GPU counts the job's runtime may report: base + joined extensions, up to base + joined,
  // leaving and joining ones (a rescale in flight may or may not have happened in its world yet).
  std::pair<int, int> ReportableGpus(const ElasticJob& job) const;
  Extension* FindExtension(uint32_t parent, int group);
  Extension* FindExtensionBySlurmJob(uint32_t slurm_job);
  // The registered elastic jobs as JSON (ElasticJob::ToJson each).
  nlohmann::json JobsJson() const;
};

}  // namespace elastic::controller
