// The session's state (internal header): Session::Impl, shared by the files that each own one
// concern of the session. Which file holds which methods:
//   session.cpp              life cycle (Create, Begin, the destructor), the rescale point, accessors
//   world_change.cpp         spawn, accept, shrink, join; the rebind and backend rebuild after each
//   handover.cpp             what a newcomer receives: the meta and the registered buffers
//   controller_commands.cpp  rank 0's commands: poll, decide, acknowledge
//   checkpoint.cpp           checkpoints, on request and at rescale points
//   session_options.cpp      SessionOptions from the ELASTIC_* table
// The rendezvous (rendezvous.h) and the guarded backend (backend_guarded.h) are apart from the
// session state: the session holds one of each.
#pragma once

#include <mpi.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "controller_commands.h"
#include "controller_link.h"
#include "elastic_mpi/session.h"
#include "rendezvous.h"
#include "watchdog.h"

namespace elastic::mpi {

namespace detail {
inline constexpr std::string_view kComponent = "elastic_mpi";
using Clock = std::chrono::steady_clock;
inline double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}
inline Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}
// Newcomers' rank 0 -> parents' rank 0 over their inter-communicator: the grow's phases reached
// (docs/runtime.md, "Deadlines of a grow"). Beside the join record's tags (join.h).
inline constexpr int kTagMergeReady = 7303;
inline constexpr int kTagStateReceived = 7304;

// A broadcast of a hand-over that missed its deadline, still pending (a newcomer that died or
// gave up never takes it; a collective's request can be neither cancelled nor freed), with the
// storage it reads or writes: kept until MPI completes it, never freed before.
struct LeftRequest {
  MPI_Request request = MPI_REQUEST_NULL;
  std::shared_ptr<void> storage;
};
}  // namespace detail

// A registered buffer: state handed to newcomers and written to checkpoints (device memory
// through a host copy: memory_space.h).
struct Buffer {
  std::string name;
  void* data;
  std::size_t bytes;
  MemorySpace space = MemorySpace::kHost;
};

// One group of the world, in join order (the world's ranks are ordered alike: the base group's,
// then each group's). inter is this rank's handle of the inter-communicator between the group and
// the world it joined, whose members are the ranks of this group and of every group before it
// (MPI_COMM_NULL for the base group, for groups that joined before this rank did, and once a
// group that joined before it left: that leave disconnected it, world_change.cpp).
struct Group {
  std::uint32_t id = 0;
  int size = 0;
  MPI_Comm inter = MPI_COMM_NULL;
};

struct Session::Impl {
  using Clock = detail::Clock;

  SessionOptions options;
  std::unique_ptr<Rendezvous> rendezvous;
  bool own_mpi = false;
  bool newcomer = false;
  bool left = false;
  bool begun = false;
  bool joined_at_point = false;
  bool stop = false;         // SIGTERM on the base group, or a relaunch: every rank stops
  MPI_Comm world = MPI_COMM_NULL;
  int rank = 0;
  int size = 0;
  std::uint32_t group_id = 0;
  std::vector<Group> groups;
  std::uint32_t next_group_id = 1;  // for spawned groups (rank 0's copy is authoritative)
  std::uint64_t step = 0;
  std::uint64_t samples = 0;
  std::uint64_t global_batch = 0;
  std::uint64_t base_batch = 0;
  GradientNoise noise;
  std::vector<Buffer> buffers;
  std::unique_ptr<CollectiveBackend> backend;
  std::vector<std::shared_ptr<MetricsSink>> sinks;
  RescaleInfo last;
  Clock::time_point last_shrink{};
  bool shrunk_before = false;
  // Inter-communicators between the base job's node groups (disconnected when the node groups
  // part at the end of the job), and the node groups of the world in world rank order.
  std::vector<NodeGroupLink> base_links;
  std::vector<int> node_groups_present;
  std::unique_ptr<detail::CollectiveGuard> guard;
  MPI_Comm pending_inter = MPI_COMM_NULL;  // a newcomer's link to the parents, for Begin()
  nlohmann::json pending_manifest;         // a newcomer's view of rank 0's buffers, checked in Begin()
  std::vector<detail::LeftRequest> left_requests;  // of abandoned hand-overs (handover.cpp)

  // Rank 0's commands (controller_commands.cpp).
  std::vector<Command> pending;  // commands read from elasticd or the command directory, oldest first
  Clock::time_point last_poll{};
  std::string expected_token;  // of the grow being carried out (used once: section 6)
  bool warned_schedule = false;
  std::unique_ptr<ControllerLink> link;
  std::uint32_t signalled_leave = 0;            // group that left on SIGTERM at this point
  std::optional<Command> current_command;       // the controller command being carried out
  std::set<std::int64_t> seen_commands;         // delivered again until acknowledged: do each once
  std::map<std::int64_t, nlohmann::json> acks;  // sent acks, re-sent when a command comes again
  std::string relaunch_world;                   // rank 0: the world of the relaunch decided on

  // Checkpoints (checkpoint.cpp).
  bool checkpoint_requested = false;  // rank 0: a checkpoint command is pending
  std::optional<Command> checkpoint_command;
  int checkpoints_written = 0;
  Clock::time_point last_checkpoint = Clock::now();  // rank 0: for checkpoint_interval_s

  explicit Impl(SessionOptions o)
      : options(std::move(o)),
        rendezvous(MakeNameServiceRendezvous(options.connect_timeout_s, options.rendezvous_uri)),
        noise(options.grad_noise_smoothing) {}

  // --- session.cpp
  Status UpdateRankSize();
  // The learning-rate factor of the job's rule at global batch b (section "Learning-rate rules").
  double LrFactorAt(std::uint64_t b) const;

  // --- world_change.cpp
  Status AdoptWorld(MPI_Comm merged);
  Status AfterWorldChange(int newcomers = 0);
  void Bind();
  Status ExchangeLiveness();
  Status Spawn(int count, std::uint32_t new_group);
  Status HandOver(MPI_Comm inter, MPI_Comm merged, std::uint32_t new_group, int count, std::string* abandoned);
  Status Abandon(MPI_Comm* inter, MPI_Comm* merged, std::uint32_t group, const std::string& why,
                 std::string* abandoned);
  Status Accept(std::uint32_t group, bool* joined, std::string* refusal);
  Status Shrink(std::uint32_t group);
  Status MergeNodeGroups();
  Status Join();
  void TestKillAt(std::string_view phase, MPI_Comm own_group) const;

  // --- handover.cpp
  std::string MetaJson(std::uint32_t new_group) const;
  void ApplyProgress(const nlohmann::json& meta);
  Status ApplyMeta(const std::string& text, MPI_Comm inter);
  Status SendState(MPI_Comm inter, std::uint32_t new_group, Clock::time_point deadline);
  Status AwaitNewcomers(MPI_Comm inter, int tag, Clock::time_point deadline, bool* arrived);
  Status TellParents(MPI_Comm inter, int tag);
  Status ReceiveState(MPI_Comm inter);
  Status AfterMerge(MPI_Comm inter, MPI_Comm merged);
  // Tests the left requests, dropping those complete with their storage; at_end (the session's
  // end): those still pending keep their storage for the rest of the process.
  void ReapLeftRequests(bool at_end);

  // --- controller_commands.cpp
  void PollController();
  void PollCommands();
  std::uint64_t ClampBatch(std::uint64_t b) const;
  Decision Decide();
  void SendAck(const Command& c, bool ok, const std::string& error);
  void AckCurrent(bool ok, const std::string& error);
  // The command being carried out is not carried out at this rescale point (a SIGTERM came
  // first): back to the front of the pending ones, unacknowledged.
  void PostponeCurrent();

  // --- checkpoint.cpp
  std::string CheckpointDir() const;
  Status WriteCheckpoint(const std::string& path);      // collective; rank 0 writes
  Status WriteCheckpointFile(const std::string& path);  // rank 0 alone
  std::uint64_t CheckpointBytes() const;                // the file's size
  Status ReadCheckpoint(const std::string& path);
  void CheckpointAndGoOn();    // a checkpoint wanted at this rescale point; training goes on
  void CheckpointBeforeStop();  // SIGTERM on the base group: the last checkpoint before the stop

  // --- relaunch.cpp
  // Collective: the state out, the launcher's record, stop. A relaunch that cannot be handed over
  // (no run dir, no room for the state, a file that cannot be written) leaves nothing behind,
  // sets *refusal (every rank) and returns Ok: the world goes on. Non-Ok: MPI failed.
  Status Relaunch(int new_size, std::string* refusal);
  // Collective, in a relaunched world where some rank got SIGTERM: *ranks_left > 0 when every
  // rank that got it (signalled) runs on a node other than the launcher's that the world can do
  // without; rank 0 then has the world without those nodes as the relaunch's (relaunch.cpp).
  Status WorldWithoutSignalledNodes(bool signalled, int* ranks_left);
  Status RestoreMeta();           // collective, in Create(): a relaunched world's step, batch, ...
  Status RestoreBuffers();        // collective, in Begin(): its registered state
  bool relaunched = false;        // this world was started again from a relaunch record
  std::string relaunched_state;   // rank 0: the state file it reads in Begin()
  std::string relaunched_world;   // rank 0: the world this one was started as (its record's)
  nlohmann::json relaunch_left_nodes = nlohmann::json::array();  // rank 0: taken away, for the record
  double relaunch_stopped_at = 0;  // rank 0: when the world before it stopped (wall clock, s)
  std::int64_t relaunch_command = 0;  // rank 0: elasticd's relaunch command, acknowledged by this world
  std::string relaunch_failed;        // rank 0: the record's "failed": this world is the one before it, again
  // Rank 0: this world as a relaunch record names one ("from_world"), given the next world's; null
  // when it cannot say (relaunch.cpp).
  nlohmann::json WorldAsRecord(const nlohmann::json& next) const;
};

}  // namespace elastic::mpi
