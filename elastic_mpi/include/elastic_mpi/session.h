// The session: one per training process. It owns the current world communicator and turns
// rescale decisions (a standalone schedule, command files, later the controller) into MPI
// dynamic process management at step boundaries, while the program keeps its training loop:
//
//   auto session = elastic::mpi::Session::Create(options, &argc, &argv).value();
//   session->RegisterDoubles("params", w.data(), w.size());      // state newcomers receive
//   session->RegisterU64("sharder", &sharder.cursor().epoch, 2);
//   session->Begin().ThrowIfError();                              // newcomers receive state here
//   while (training) {
//     if (session->RescalePoint().value()) {                      // world or batch changed
//       if (session->should_stop()) break;                        // this group left / SIGTERM
//     }
//     ... one step: session->world(), global_batch(), local_batch(), lr_factor() ...
//     session->ReportStep(step_time_s);
//   }
//   session.reset();                                              // MPI_Finalize if we own MPI
//
// Ranks: the base group keeps ranks 0..P-1; each group that joins (spawned, or connected from a
// separately launched job) is appended in order; a group that leaves is removed and the ranks
// after it shift down. Any joined group may leave, in any order; the base group never leaves
// (docs/runtime.md, "shrink").
//
// Threading: every method is called from the training thread only. Collective methods (marked)
// must be called by every rank of the current world in the same order.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/common/log.h"
#include "elastic_mpi/backend.h"
#include "elastic/common/exit_codes.h"
#include "elastic_mpi/metrics.h"
#include "elastic_mpi/scaling.h"
#include "elastic_mpi/tunables.h"

namespace elastic::mpi {

// Exit status for a program whose world broke (a call returned kUnavailable; the watchdogs exit
// with it themselves): elasticd requeues the job and it resumes from its last checkpoint.
inline constexpr int kExitWorldLost = ::elastic::kExitWorldLost;

// One entry of a standalone schedule: the world size and (optionally) the global batch.
struct ScheduleEntry {
  int world_size = 0;
  std::uint64_t global_batch = 0;  // 0: keep the current batch
  bool operator==(const ScheduleEntry&) const = default;
};

// Parses "2->4->6->4->2" or "2:64->4:128->2:64" (size:global_batch). Sizes >= 1, batches >= 1.
// kInvalidArgument naming the bad entry otherwise. An empty text gives an empty schedule.
Result<std::vector<ScheduleEntry>> ParseSchedule(std::string_view text);

struct SessionOptions {
  bool standalone = false;        // no controller (tests, plain mpirun)
  bool rigid = false;             // ELASTIC_MODE=rigid: never rescale
  std::string job_id = "standalone";
  std::uint32_t group_id = 0;     // this process's group (0 = base job)
  // The base job's initial node groups (one launcher per node): node group i > 0 connects to the
  // world of node groups 0..i-1 at Create() and merges; all keep group id 0. docs/runtime.md.
  int node_group = 0;
  int node_groups = 1;
  // Nodes of an initial world that one launch started over all of them (Open MPI 5): their
  // launchers hold them until it ends, so such a world is not relaunched (ELASTIC_SPANNED_NODES).
  int spanned_nodes = 1;
  bool join = false;              // this group joins a running world through the rendezvous
  std::string join_token;         // 32 hex digits (joiners send it; parents check commands' tokens)
  std::string command_dir;        // rank 0 polls *.json command files here ("" = none)
  std::string controller;         // elasticd HOST:PORT ("" = none): rank 0 polls it for commands
  std::string munge_socket;       // munged's socket for the controller link ("" = munge's default)
  double metrics_interval_s = 5;  // at most one metrics message to elasticd per interval

  std::uint64_t global_batch = 0;       // initial global batch, samples per step (> 0)
  // Or the initial per-rank batch (a DDP script's DataLoader batch_size): with global_batch 0,
  // Create() sets the initial global batch to local_batch x the initial world size (all node
  // groups; a newcomer takes the running world's batch instead). One of the two must be > 0.
  std::uint64_t local_batch = 0;
  // Or neither yet (both 0): the program gives its per-rank batch later, with
  // SetInitialLocalBatch() before the first RescalePoint() (a torch script whose DataLoader is
  // made after the process group).
  bool defer_batch = false;
  std::uint64_t base_global_batch = 0;  // B0 of the learning-rate rule (0: the initial batch)
  std::optional<std::uint64_t> batch_min, batch_max;  // clamp for every batch change
  LrRule lr_rule = LrRule::kNone;
  double grad_noise_smoothing = 0.9;

  std::vector<ScheduleEntry> schedule;  // standalone: entry i applies from step i*schedule_every
  std::uint64_t schedule_every = 10;

  double spawn_timeout_s = 60;    // watchdog on MPI_Comm_spawn
  double connect_timeout_s = 60;  // watchdog on connect/accept and the token exchange
  // Watchdog on the rescale point's collective and the backend's collectives: when one is this
  // late, every peer is probed (liveness side channel); a rank that died (e.g. SIGKILL) makes the
  // others stop with a clear error (exit 75) instead of hanging, a rank that is only slow is
  // waited for (0: off).
  double collective_timeout_s = 20;
  // A collective late with every rank alive ends the world after this long in all (0: never).
  double stall_timeout_s = 1800;
  // Each phase of a grow after the accept (merge, state hand-over, backend grow) must end within
  // this; a grow that misses it, or whose joiner never connects, is abandoned (docs/runtime.md).
  double grow_phase_timeout_s = 60;
  double respawn_delay_s = 1;     // minimum pause between a shrink and the next spawn
  double poll_interval_s = 1;     // command polling period of rank 0
  BackendKind backend = BackendKind::kAuto;
  bool hierarchical_allreduce = false;  // MPI backend in merged worlds: see MakeBackend
  double nccl_timeout_s = 120;          // deadline on NCCL communicator set-up (BackendOptions)
  // How this process numbers its GPUs (BackendOptions::device_numbering): from the environment,
  // the Slurm job id and CUDA_VISIBLE_DEVICES.
  std::string device_numbering;
  bool bind = true;               // bind each rank to its share of the node's cores (hwloc)
  std::string metrics_file;       // JSON-lines metrics on rank 0 ("" = none)
  std::string checkpoint_dir;  // "" : <run_dir>/checkpoint when run_dir is set
  // Write a checkpoint at the first rescale point after this many seconds since the last one
  // (0: only on request, SIGUSR1 and SIGTERM). The checkpoint a restarted job resumes from.
  double checkpoint_interval_s = 0;
  // Samples the job trains in all (e.g. epochs x dataset size; 0: unknown). Reported to elasticd
  // with the metrics, so that its remaining-time objective can estimate the time left.
  double total_samples = 0;
  std::string run_dir;
  // The relaunch record this world starts from (ELASTIC_RELAUNCH_FROM, set by elastic-launch when
  // it starts a world again after a `relaunch` command; docs/runtime.md, "Relaunch"): the step,
  // batch and statistics of the world before it, and in Begin() its registered state.
  std::string relaunch_from;
  std::string test_kill_at;  // tests: a joiner's rank 0 dies at this grow phase (connect, merge, state)
  std::string rendezvous_uri;  // the job's ompi-server URI file (releases an accept no joiner reaches)
  // Install a SIGTERM handler: a group whose rank gets SIGTERM (scancel of its extension job,
  // preemption) leaves at the next rescale point; SIGTERM on the base group stops the job.
  bool handle_sigterm = true;
  // Install a SIGUSR1 handler (Slurm's time-limit warning, sbatch --signal=USR1@60): every rank
  // writes a checkpoint to checkpoint_dir at the next rescale point and training goes on.
  bool handle_sigusr1 = true;
  // argv of the program that MPI_Comm_spawn starts; empty: this program with its own arguments
  // (read from /proc/self).
  std::vector<std::string> spawn_command;

  // Options from a Config (the ELASTIC_* table). kConfig/kInvalidArgument on malformed values.
  static Result<SessionOptions> FromConfig(const Config& config);
  static Result<SessionOptions> FromEnvironment();
};

// What the last rescale did (rank-local copy; the timings are this rank's).
struct RescaleInfo {
  std::string what;                      // "grow", "join", "shrink", "batch", or "" (none yet)
  bool ok = true;                        // false: the change failed and the world kept its size
  std::string error;                     // why it failed ("bad-token", a library message)
  std::uint32_t group = 0;               // the group that joined or left
  int old_size = 0, new_size = 0;        // ranks
  std::uint64_t old_batch = 0, new_batch = 0;
  double pause_s = 0;                    // time inside RescalePoint, seconds
  std::map<std::string, double> phases;  // "spawn", "accept", "merge", "state", ... seconds
};

class Session {
 public:
  // Initialises MPI when it is not initialised yet (then the session finalises it too),
  // connects a joining group (options.join), or merges with the parents when this process was
  // spawned; the caller owns the session. argc/argv may be null.
  // Failure: kUnavailable (MPI), kTimeout, kPermission (a join refused: bad token),
  // kInvalidArgument (options).
  static Result<std::unique_ptr<Session>> Create(SessionOptions options, int* argc = nullptr,
                                                 char*** argv = nullptr);
  ~Session();  // frees communicators; MPI_Finalize when the session initialised MPI
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // --- state to hand over (register before Begin; buffers stay owned by the caller and must
  // stay valid and keep their size for the session's lifetime). Names are unique; a duplicate
  // throws elastic::Error(kInvalidArgument). Newcomers receive rank 0's contents. A buffer in
  // device memory (space kDevice) is handed over and checkpointed through a host copy.
  void RegisterBytes(const std::string& name, void* data, std::size_t bytes,
                     MemorySpace space = MemorySpace::kHost);
  void RegisterFloats(const std::string& name, float* data, std::size_t count,
                      MemorySpace space = MemorySpace::kHost);
  void RegisterDoubles(const std::string& name, double* data, std::size_t count,
                       MemorySpace space = MemorySpace::kHost);
  void RegisterU64(const std::string& name, std::uint64_t* data, std::size_t count,
                   MemorySpace space = MemorySpace::kHost);

  // Collective. Finishes start-up: a newcomer receives the registered state from rank 0 (the
  // names and sizes must match rank 0's, else kInternal), every rank binds to its cores and
  // creates the collective backend. Call once, after registering state.
  Status Begin();

  // The initial batch of a session created with defer_batch and no batch: the global batch
  // becomes local_batch x the world size (and B0 of the learning-rate rule, unless
  // base_global_batch is set). Local; call it on every rank of the base job with the same value,
  // before the first RescalePoint(). A session that has its batch (given at creation, set
  // before, or a newcomer's: the running world's) keeps it.
  Status SetInitialLocalBatch(std::uint64_t local_batch);

  // Collective; call at every step boundary. Applies at most one pending change (grow, join,
  // shrink, batch) and returns true when the world or the batch changed. A failed grow returns
  // false and leaves the world as it was (last_rescale() says why). On a rank whose group left,
  // returns true and left() is true: stop training and destroy the session.
  Result<bool> RescalePoint();

  bool left() const noexcept;
  // True when this rank must stop training: its group left, or the base group got SIGTERM (then
  // every rank stops, after a checkpoint to checkpoint_dir when one is set).
  bool should_stop() const noexcept;
  // This world was started again by the launcher after a `relaunch` (docs/runtime.md, "Relaunch"):
  // its registered state, step and batch are the world's before it, as a newcomer's are; a
  // program that resumes from its own checkpoint at start must not do so then.
  bool relaunched() const noexcept;
  bool newcomer() const noexcept;            // this process joined a running world
  MPI_Comm world() const noexcept;           // current world (owned by the session)
  int rank() const noexcept;
  int size() const noexcept;
  std::uint32_t group_id() const noexcept;
  std::uint64_t step() const noexcept;       // rescale points passed (the job's step count)

  std::uint64_t global_batch() const noexcept;
  std::uint64_t local_batch() const noexcept;  // this rank's share of the global batch
  double lr_factor() const;                    // factor of the rule at the current batch

  // Collective: one small allreduce. local_mean is this rank's mean gradient over local_count
  // samples (may be 0), global_mean the world's mean gradient (after the averaging allreduce).
  // Updates the gradient-noise statistics (needs >= 2 ranks with samples).
  Status ObserveGradients(std::span<const double> local_mean, std::uint64_t local_count,
                          std::span<const double> global_mean);
  Status ObserveGradients(std::span<const float> local_mean, std::uint64_t local_count,
                          std::span<const float> global_mean);
  // Collective: the same from squared norms, for programs whose gradients are reduced elsewhere
  // (a torch DDP hook): local_sqr = |this rank's mean gradient|^2 over local_count samples,
  // global_sqr = |the world's mean gradient|^2. A local value that is no finite number >= 0 counts
  // as no samples; a global one updates nothing.
  Status ObserveGradientNorms(double local_sqr, std::uint64_t local_count, double global_sqr);
  const GradientNoise& gradient_noise() const noexcept;

  // Records one finished step (seconds) and, on rank 0, passes metrics to the sinks.
  void ReportStep(double step_time_s, std::uint64_t samples_in_step);
  void AddMetricsSink(std::shared_ptr<MetricsSink> sink);

  CollectiveBackend& backend();  // valid after Begin(); throws kInternal before
  const RescaleInfo& last_rescale() const noexcept;
  const SessionOptions& options() const noexcept;

  // Collective: rank 0 writes every registered buffer to path (atomically: temp file + rename).
  Status WriteCheckpoint(const std::string& path);
  // Every rank reads path into its registered buffers (names and sizes must match).
  Status ReadCheckpoint(const std::string& path);
  // Where checkpoints on signals and commands go: <checkpoint_dir>/checkpoint.bin ("" : none).
  std::string checkpoint_path() const;
  // Checkpoints written at rescale points (SIGUSR1, SIGTERM on the base group, a command).
  int checkpoints_written() const noexcept;

  struct Impl;

 private:
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace elastic::mpi
