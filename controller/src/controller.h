// The controller's logic: the registry of elastic jobs and their extensions, the handlers of
// the runtime channel's messages, the scheduling epoch (snapshot -> optimizer -> node groups ->
// diff -> enact) and the reconciliation with Slurm after a restart. Single-threaded: the
// server and the epoch timer call it from one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "config.h"
#include "db.h"
#include "roles.h"
#include "elastic/optimizer/goodput.h"
#include "elastic/optimizer/model.h"
#include "slurm_adapter.h"
#include "snapshot.h"

namespace elastic::controller {

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
  std::string state = "running";                   // running | ended
  std::string init_token;
  nlohmann::json launcher;  // argv, cwd, env, rendezvous_uri, topology (null until the launcher reported)
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
  std::vector<optimizer::StepSample> samples;  // recent step-time observations
  std::optional<optimizer::EfficiencyParams> efficiency;
  // The step-time model fitted from `samples` (not persisted: refitted after a restart). Fitting
  // is the costly part of an epoch, so a fit is reused until the job has twice the samples it
  // was fitted on, has run at a new size, or is five minutes old.
  mutable std::optional<optimizer::PolluxParams> fit;
  mutable size_t fit_samples = 0;
  mutable size_t fit_sizes = 0;
  mutable double fit_at = 0;
  // The option table of the last epoch, reused while its inputs are the same (see Epoch()).
  mutable std::optional<std::vector<optimizer::Option>> options_cache;
  mutable std::tuple<int, int, double, int64_t, int, int> options_key{};
  mutable double options_at = 0;

  nlohmann::json ToJson() const;
  static ElasticJob FromJson(const nlohmann::json& j);
  int SpecInt(const char* key, int fallback) const;
};

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
  std::string state;  // submitting submitted registered ready joining joined leaving left failed cancelled
  double created_at = 0;
  double joined_at = 0;
  bool Active() const;    // holds (or is about to hold) GPUs for its parent
  bool InFlight() const;  // not yet joined, or leaving
};

struct EpochResult {
  nlohmann::json plan;     // the optimizer's plan and the controller's decisions
  double duration_ms = 0;  // snapshot + plan + diff (+ enact unless dry run)
  std::map<std::string, double> stage_ms;
};

class Controller {
 public:
  Controller(ControllerConfig config, std::unique_ptr<Database> db, std::unique_ptr<SlurmAdapter> slurm);

  // Answers one message from `uid` (already authenticated by munge). Never throws.
  nlohmann::json Handle(uid_t uid, const nlohmann::json& msg);

  // One scheduling epoch. `dry_run`: plan only, enact nothing.
  EpochResult RunEpoch(bool dry_run = false);
  // The epoch's stages on a given view of Slurm (recorded snapshots, benchmarks): bring the
  // registry in line (unless dry_run), snapshot, plan, diff, and enact (unless dry_run).
  // `slurm_ms`: what reading `nodes` and `jobs` from slurmctld took (part of the epoch's time).
  EpochResult Epoch(const std::vector<NodeInfo>& nodes, const std::vector<JobInfo>& jobs, bool dry_run,
                    double slurm_ms = 0.0);
  // The registered elastic jobs as JSON (ElasticJob::ToJson each).
  nlohmann::json RegistryJson() const;

  // After a start or restart: adopt or cancel extension jobs, finish or roll back rescales in
  // flight, mark jobs that ended while elasticd was down.
  void Reconcile();

  // Applies a new, already validated configuration (reload).
  void SetConfig(ControllerConfig config);
  const ControllerConfig& config() const { return config_; }

 private:
  using Json = nlohmann::json;
  Json Dispatch(uid_t uid, const Json& msg);
  Json OnRegister(uid_t uid, const Json& msg);
  Json OnRegisterExtension(uid_t uid, const Json& msg);
  Json OnLauncher(uid_t uid, const Json& msg);
  Json OnMetrics(uid_t uid, const Json& msg);
  Json OnPoll(uid_t uid, const Json& msg);
  Json OnAck(uid_t uid, const Json& msg);
  Json OnReady(uid_t uid, const Json& msg);
  Json OnLeft(uid_t uid, const Json& msg);
  Json OnEnded(uid_t uid, const Json& msg);
  Json OnStatus(uid_t uid, const Json& msg);
  Json OnPlan(uid_t uid, const Json& msg);
  Json OnPause(uid_t uid, const Json& msg, bool pause);
  Json OnPauseAll(uid_t uid, bool pause);
  Json OnSetPolicy(uid_t uid, const Json& msg);
  Json OnSnapshot(uid_t uid, const Json& msg);

  // The registered job `msg.job`; throws elastic::Error(kNotFound) when there is none.
  ElasticJob& FindJob(const Json& msg);
  // The registered job `msg.job` if `uid` may speak for it (owner, root, SlurmUser); throws
  // elastic::Error.
  ElasticJob& OwnedJob(uid_t uid, const Json& msg);

  void SaveJob(const ElasticJob& job);
  void SaveExtension(Extension& ext);
  int64_t QueueCommand(uint32_t job, Json body);
  void Audit(std::optional<uid_t> actor, const std::string& action, uint32_t job, const Json& detail);
  void SetGpus(ElasticJob& job, int gpus);  // closes the open interval, opens one at `gpus`
  int CurrentGpus(const ElasticJob& job) const;   // base + joined extensions
  int PlannedGpus(const ElasticJob& job) const;   // base + every active extension
  void EndJob(ElasticJob& job, const std::string& why);
  void EndExtension(Extension& ext, const std::string& state, const std::string& reason, bool cancel);
  Extension* FindExtension(uint32_t parent, int group);
  Extension* FindExtensionBySlurmJob(uint32_t slurm_job);
  Status SubmitExtension(ElasticJob& job, const std::string& node, int gpus);
  // Queues set_batch for `job` at `gpus` GPUs (DecideBatchChange said so in `decision`).
  void QueueBatchChange(ElasticJob& job, int64_t batch, int gpus, const Json& decision);
  void LoadState();
  // Jobs whose batch script ended with kExitWorldLost (75): requeued once Slurm has cleaned them
  // up, unless recovery.restart_world_lost is off or they were restarted max_restarts times.
  void RestartLostWorlds(const std::map<uint32_t, const JobInfo*>& by_id);
  void FinishRestart(uint32_t job, const std::string& action, const Json& detail);

  ControllerConfig config_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<SlurmAdapter> slurm_;
  Roles roles_;                                  // who administers elasticd (roles.h)
  std::map<uint32_t, ElasticJob> jobs_;          // running elastic jobs (ended ones stay in the DB)
  std::map<int64_t, Extension> extensions_;      // every non-final extension
  std::set<uint32_t> restarts_;                  // ended jobs to requeue (state 'restart' in the DB)
  bool paused_all_ = false;
  int64_t epochs_ = 0;
};

// 128 random bits as 32 lowercase hex digits (join tokens).
std::string NewToken();
double Now();

}  // namespace elastic::controller
