// The controller: it owns the registry (registry.h) and its records in the state database
// (db_records.h), and ties together the concerns that act on them, one file each:
// handlers.cpp (the runtime channel's messages, with who may send each), lifecycle.cpp
// (extensions and jobs from submission to end, reconciliation with Slurm), plan_input.cpp
// (registry + Slurm view -> optimizer snapshot) and epoch.cpp (plan, diff, enact).
// Single-threaded: the server and the epoch timer call it from one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config.h"
#include "db.h"
#include "db_records.h"
#include "epoch_trigger.h"
#include "elastic/optimizer/model.h"
#include "plan_input.h"
#include "registry.h"
#include "roles.h"
#include "slurm_adapter.h"
#include "snapshot.h"

namespace elastic::controller {

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

  // One scheduling epoch. `dry_run`: plan only, enact nothing. `why`: what triggered it, for the log.
  EpochResult RunEpoch(bool dry_run = false, const std::string& why = "");

  // ---- events.cpp: when the next epoch runs (epoch_trigger.h)
  // Looks at Slurm's job table when scheduler.watch_interval has passed since the last look and
  // notes jobs submitted, started or ended since. No-op with event epochs off.
  void Watch();
  // Whether an epoch is due now (the period passed, or an event waits and the gap passed), and why.
  bool EpochDue(std::string* why) const;
  // Seconds until the timer should look again (Watch and EpochDue).
  double SecondsUntilNextCheck() const;
  // The epoch's stages on a given view of Slurm (recorded snapshots, benchmarks): bring the
  // registry in line (unless dry_run), snapshot, plan, diff, and enact (unless dry_run).
  // `slurm_ms`: what reading `nodes` and `jobs` from slurmctld took (part of the epoch's time).
  EpochResult Epoch(const std::vector<NodeInfo>& nodes, const std::vector<JobInfo>& jobs, bool dry_run,
                    double slurm_ms = 0.0);
  // The registered elastic jobs as JSON (ElasticJob::ToJson each).
  nlohmann::json RegistryJson() const { return registry_.JobsJson(); }

  // After a start or restart: adopt or cancel extension jobs, finish or roll back rescales in
  // flight, mark jobs that ended while elasticd was down.
  void Reconcile();

  // Applies a new, already validated configuration (reload).
  void SetConfig(ControllerConfig config);
  const ControllerConfig& config() const { return config_; }

 private:
  using Json = nlohmann::json;

  // ---- handlers.cpp: the runtime channel
  enum class Caller;
  struct HandlerEntry;
  // One message, after Dispatch checked its caller.
  struct Request {
    uid_t uid;
    const Json& msg;
    const std::string& type;
    ElasticJob* job;                // msg.job, for the handlers that speak for a job
    std::optional<std::string> as;  // the basis of the caller's role, when a role was needed
  };
  static const std::map<std::string, HandlerEntry>& Handlers();
  Json Dispatch(uid_t uid, const Json& msg);
  // The registered job `msg.job`; throws elastic::Error(kNotFound) when there is none.
  ElasticJob& FindJob(const Json& msg);
  Json OnRegister(const Request& r);
  Json OnRegisterExtension(const Request& r);
  Json OnLauncher(const Request& r);
  Json OnMetrics(const Request& r);
  Json OnPoll(const Request& r);
  Json OnAck(const Request& r);
  // One group's part of an acknowledged grow or shrink (a relaunch: its "op"; a relaunch that
  // several groups join finishes each).
  // `error`: the runtime's reason where it failed.
  void FinishGroupCommand(uid_t uid, ElasticJob& job, const std::string& action, int group, bool ok,
                          const std::string& error, double pause, const Json& phases, double now);
  Json OnReady(const Request& r);
  Json OnLeft(const Request& r);
  Json OnEnded(const Request& r);
  Json OnStatus(const Request& r);
  Json OnPlan(const Request& r);
  Json OnPause(const Request& r);     // pause, resume
  Json OnPauseAll(const Request& r);  // pause_all, resume_all
  Json OnSetPolicy(const Request& r);
  Json OnSnapshot(const Request& r);
  Json OnTrialDone(const Request& r);  // fused_sweep.cpp

  // ---- fused_sweep.cpp: fused sweeps (--elastic-fuse arrays), fused_sweep.h
  // The running leader of array `array_job` other than job `except`; nullptr when none.
  ElasticJob* SweepLeader(uint32_t array_job, uint32_t except);
  // A fused array task registering while its array has a leader: the reply that makes it a member
  // (it ends at once, its trial trained by the leader); nullopt for every other job.
  std::optional<Json> FusedMemberReply(uint32_t job_id, const Json& msg);
  // The registering task leads its array's sweep: holds the array's pending tasks, records them
  // in job.fuse; the reply's "fuse" object {role: leader, trials}.
  Json BecomeSweepLeader(ElasticJob& job, const Json& msg);
  // The leader ended: its held tasks whose trial it did not finish are released.
  void EndSweep(ElasticJob& job);

  // ---- events.cpp
  // Something the plan should react to happened (a job registered, reported its first step, a
  // rescale finished): with event epochs on, an epoch runs within scheduler.event_min_gap.
  void NotifyEvent(const std::string& what);

  // ---- controller.cpp: the registry and its records
  void LoadState();
  void SaveJob(const ElasticJob& job);
  void SaveExtension(Extension& ext);  // inserts (id 0) or updates; a final state leaves the registry
  int64_t QueueCommand(uint32_t job, const Json& body);
  void Audit(std::optional<uid_t> actor, const std::string& action, uint32_t job, const Json& detail);
  void SetGpus(ElasticJob& job, int gpus);  // closes the open interval, opens one at `gpus`

  // ---- command_delivery.cpp: what a job's runtime receives when it polls
  // Its commands not acknowledged, in order; a relaunch alone, once those before it are
  // acknowledged, with its world made then (the commands after it wait with it).
  nlohmann::json DeliverCommands(ElasticJob& job);
  // The world of a relaunch of `job` (relaunch_world.h): its relaunch groups in the world (joined
  // or leaving), with the groups `add` and without those in `drop`.
  Result<nlohmann::json> RelaunchWorldFor(const ElasticJob& job, const std::set<int>& add, const std::set<int>& drop);
  // The relaunches queued right after commands[first] that go with it (command_delivery.cpp): not
  // yet sent, of the same op, for a grow each group ready. Returns the index of the last one;
  // `groups` gets every group of them, commands[first]'s included.
  size_t RelaunchFold(const ElasticJob& job, const std::vector<records::OutstandingCommand>& commands, size_t first,
                      std::set<int>& groups);
  // Why the relaunch that brings group `group` in waits before it is sent (empty: it does not): a
  // group of the job submitted with it is not ready yet, and extensions.relaunch_gather has not
  // passed since `group` became ready.
  std::string RelaunchGatherWait(const ElasticJob& job, int group) const;

  // ---- lifecycle.cpp: extensions and jobs from submission to end
  // by_relaunch: the extension's launcher holds its node (`--hold`) and the group joins by a
  // relaunch of the world over it (ElasticJob::relaunch_groups).
  Status SubmitExtension(ElasticJob& job, const std::string& node, int gpus, bool by_relaunch = false);
  // Whether Slurm job `j` is extension `e` of `parent` as elasticd submitted it (its link, its owner).
  bool IsExtensionOf(const JobInfo& j, const ElasticJob& parent, const Extension& e) const;
  void EndExtension(Extension& ext, ExtState state, const std::string& reason, bool cancel);
  void EndJob(ElasticJob& job, const std::string& why);
  // The epoch's first stage: end jobs and extensions Slurm no longer runs, extensions that did not
  // join in time or whose job did not let them leave in time, and requeue lost worlds.
  void SyncWithSlurm(const std::map<uint32_t, const JobInfo*>& by_id, double now);
  // A leaving extension past extensions.leave_timeout: cancelled, with an audit record and a warning.
  void EndOverdueLeave(Extension& e, double now);
  void EndedFromOutside(Extension& e, double now);  // its extension job ended, not by elasticd
  // Jobs whose batch script ended with kExitWorldLost (75): requeued once Slurm has cleaned them
  // up, unless recovery.restart_world_lost is off or they were restarted max_restarts times.
  void RestartLostWorlds(const std::map<uint32_t, const JobInfo*>& by_id);
  void FinishRestart(uint32_t job, const std::string& action, const Json& detail);
  // Queues set_batch for `job` at `gpus` GPUs (DecideBatchChange said so in `decision`).
  void QueueBatchChange(ElasticJob& job, int64_t batch, int gpus, const Json& decision);

  // ---- epoch.cpp: plan, diff, enact
  struct FreeGpus;
  // The optimizer's plan for the snapshot; nullopt when there is nothing to plan or it failed.
  std::optional<optimizer::Plan> Solve(const optimizer::Snapshot& snap);
  // One decision per elastic job (plan_input's order), enacted unless dry_run; a job in `shrunk`
  // (MakeRoom let an extension of it go this epoch) has that decision. `free`: the GPUs growth may
  // take, as MakeRoom left them.
  Json DiffAndEnact(const PlanInput& in, const std::optional<optimizer::Plan>& plan, FreeGpus& free,
                    std::map<uint32_t, Json>& shrunk, bool dry_run, double now);
  // Room for waiting jobs whose request is per node (PlanInput::waiting_shapes, waiting_room.h),
  // before the plan: per such job (the first kRoomForFirst, in the order Slurm starts them), the
  // nodes it can start on at the least cost; the extensions in its way leave (their GPUs held for
  // waiting jobs, as a shrink for a waiting job holds them) and its GPUs on those nodes are kept
  // from growth this epoch. Extensions of jobs that may not rescale now (frozen) or move stay;
  // the epoch looks again when they may. One entry per such job ("action": fits, release or
  // none); `shrunk`: the decision of each job an extension left (a shrink, `room_for` naming the
  // waiting jobs).
  Json MakeRoom(const PlanInput& in, FreeGpus& free, bool dry_run, double now, std::map<uint32_t, Json>& shrunk);
  // One extension leaves its job (joined: a shrink command; not yet joined: cancelled), its GPUs
  // held for waiting jobs when `hold` (extensions.release_hold).
  void LetGo(ElasticJob& job, Extension& e, const PlanInput& in, bool hold, double now);
  // `a`: the plan's assignment for the job (nullptr: none, or it gets nothing this epoch).
  Json Decide(ElasticJob& job, const PlanInput& in, const optimizer::Assignment* a, FreeGpus& free, bool dry_run,
              double now);
  void Grow(ElasticJob& job, const PlanInput& in, int current, int target, FreeGpus& free, bool dry_run, Json& d);
  void Shrink(ElasticJob& job, const PlanInput& in, int current, int target, const std::vector<int64_t>& draining,
              bool dry_run, double now, Json& d);
  void MaybeChangeBatch(ElasticJob& job, const PlanInput& in, int gpus, int64_t batch, bool dry_run, Json& d);

  // ---- moves.cpp: a job moved to another GPU type it accepts (type_moves.h): a checkpoint
  // command, then (acknowledged) a held requeue, then (the job pending) its release with the nodes
  // of other types excluded, then its registration on the new type.
  struct Move {
    enum class Phase { kCheckpoint, kRequeued, kReleased };
    Phase phase = Phase::kCheckpoint;
    std::string from;
    std::string to;
    int64_t command = 0;     // the checkpoint command
    double started_at = 0;
    ElasticJob job;          // the job's record while Slurm has it requeued (out of the registry)
    Json check;              // the MoveCheck that started it
  };
  // What a move costs: the mean of those measured (start to registration on the new type), else
  // types.move_cost.
  double MoveCostS() const;
  // The plan put the job on another type (`a`): shrink it to its base first, or start the move
  // when it pays back and the type has the GPUs free, or say why not.
  void MaybeMove(ElasticJob& job, const PlanInput& in, const optimizer::Assignment& a, FreeGpus& free, bool dry_run,
                 double now, Json& d);
  // The runtime acknowledged a move's checkpoint command: requeue the job held, or give up.
  void OnMoveCheckpoint(ElasticJob& job, int64_t command, bool ok, const std::string& error);
  // SyncWithSlurm: a job requeued for a move leaves the registry, its record kept with the move.
  // Returns false when the job is not being moved.
  bool EndForMove(ElasticJob& job);
  // The epoch: release requeued jobs (once Slurm finished ending them) toward the new type; give
  // up moves whose checkpoint never came or whose job is gone.
  void AdvanceMoves(const std::vector<NodeInfo>& nodes, const std::map<uint32_t, const JobInfo*>& by_id, double now);
  // OnRegister: the job starts on its new type: its record (speeds, samples per type) comes back.
  std::optional<ElasticJob> FinishMove(uint32_t id, const std::string& type, double now);
  Json MovesJson() const;
  static Json MoveJson(const Move& m);  // as stored in the job record (ElasticJob::move)
  void RestoreMoves();                  // LoadState: moves past their checkpoint, from the database
  void SaveMove(Move& m);               // the job's record, state 'moving', with the move
  void EndMove(uint32_t id, Move& m);   // a move given up: the record without it

  ControllerConfig config_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<SlurmAdapter> slurm_;
  Roles roles_;                // who administers elasticd (roles.h)
  Registry registry_;          // running elastic jobs and their non-final extensions
  std::set<uint32_t> restarts_;  // ended jobs to requeue (state 'restart' in the DB)
  bool paused_all_ = false;
  int64_t epochs_ = 0;
  // GPUs released for waiting jobs, per node and GPU type, kept from growth until `until` (epoch.cpp).
  struct Hold {
    std::string node;
    std::string type;  // the GPU type released
    int gpus = 0;
    double until = 0;
  };
  std::map<std::pair<std::string, std::string>, Hold> holds_;  // (node, type)
  std::map<uint32_t, Move> moves_;   // moves in flight (moves.cpp)
  std::vector<double> move_costs_;   // measured move costs, seconds
  EpochTrigger trigger_;
  JobTableSummary seen_jobs_;  // the job table at the last epoch or look (events.cpp)
  time_t jobs_since_ = 0;      // slurmctld's update time of that table
  double last_watch_ = 0;
};

}  // namespace elastic::controller
