// The session's life cycle and its step boundary: Create (MPI, the controller link, how this
// process enters its world), Begin, the rescale point that every rank passes at each step, the
// destructor that takes a merged world apart, and the accessors. The concerns it drives live
// beside it (session_impl.h lists them). docs/runtime.md describes the protocol; the comments
// here say why each step is the way it is.
#include "elastic_mpi/session.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>

#include "check.h"
#include "mpi_stack.h"
#include "elastic_mpi/sharding.h"
#include "relaunch.h"
#include "session_impl.h"

namespace elastic::mpi {

namespace {

using detail::Clock;
using detail::kComponent;
using detail::Seconds;

// Set by SIGTERM (scancel, preemption with a grace time): the rank's group leaves at the next
// rescale point (any joined group; SIGTERM on the base group stops the job). A signal handler
// may only touch a sig_atomic_t and make async-signal-safe calls: in a relaunched world it also
// creates <run dir>/sigterm.<node> (open, close; relaunch.h), so that the launcher knows the node
// was taken away even when the world ends before the next rescale point.
volatile std::sig_atomic_t g_terminate = 0;
char g_signalled_marker[4096] = {};
extern "C" void OnTerminate(int) {
  g_terminate = 1;
  if (g_signalled_marker[0] != '\0') {
    const int saved = errno;
    const int fd = open(g_signalled_marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
    errno = saved;
  }
}
// Set by SIGUSR1 (Slurm's time-limit warning): checkpoint at the next rescale point, go on.
volatile std::sig_atomic_t g_checkpoint = 0;
extern "C" void OnCheckpointSignal(int) { g_checkpoint = 1; }

}  // namespace

Status Session::Impl::UpdateRankSize() {
  ELASTIC_MPI_CHECK(MPI_Comm_rank(world, &rank));
  ELASTIC_MPI_CHECK(MPI_Comm_size(world, &size));
  return Status::Ok();
}

double Session::Impl::LrFactorAt(std::uint64_t b) const {
  return LrFactor(options.lr_rule, static_cast<double>(b), static_cast<double>(base_batch), noise);
}

// ---------------------------------------------------------------------------------------------

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Session>> Session::Create(SessionOptions options, int* argc, char*** argv) {
  if (options.global_batch == 0 && options.local_batch == 0 && !options.defer_batch) {
    return Status(ErrorKind::kInvalidArgument,
                  "SessionOptions.global_batch (or local_batch, the per-rank batch) must be > 0, or defer_batch "
                  "set and the batch given with SetInitialLocalBatch() before the first rescale point");
  }
  // Before MPI starts: a world of more node groups than this build's rendezvous can merge would
  // hang in the merge (mpi_stack.h, MaxNodeGroups).
  if (const int most = stack::MaxNodeGroups(); most > 0 && options.node_groups > most) {
    return Status(ErrorKind::kInvalidArgument,
                  "this job has " + std::to_string(options.node_groups) + " node groups (one per node of its step), " +
                      "but this runtime (rendezvous " + stack::RendezvousKind() + ") merges at most " +
                      std::to_string(most) + " into one world: " + stack::NodeGroupLimitReason() +
                      " (docs/interfaces.md section 5). Run the job on at most " + std::to_string(most) +
                      " nodes, or with the runtime built against Open MPI 4.1");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  Impl& s = *impl;
  int initialized = 0;
  ELASTIC_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = 0;
    ELASTIC_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    s.own_mpi = true;
  }
  // At the end of a job whose world spans several launches (extension jobs), the groups finalize
  // independently and a TCP peer may already be gone when the last bytes go out: that must be an
  // EPIPE for Open MPI to ignore, not a SIGPIPE that kills a rank that finished its work.
  std::signal(SIGPIPE, SIG_IGN);
  if (s.options.handle_sigterm) {
    if (!s.options.relaunch_from.empty() && !s.options.run_dir.empty()) {
      const std::string marker = s.options.run_dir + "/" + kSignalledPrefix + ThisNodeName();
      if (marker.size() < sizeof g_signalled_marker) {
        std::snprintf(g_signalled_marker, sizeof g_signalled_marker, "%s", marker.c_str());
      }
    }
    struct sigaction sa {};
    sa.sa_handler = OnTerminate;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
  }
  if (s.options.handle_sigusr1) {
    struct sigaction sa {};
    sa.sa_handler = OnCheckpointSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  }
  // Errors come back as return codes: the session turns them into Status values.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  s.global_batch = s.options.global_batch;
  s.base_batch = s.options.base_global_batch != 0 ? s.options.base_global_batch : s.global_batch;
  s.group_id = s.options.group_id;

  MPI_Comm parent = MPI_COMM_NULL;
  ELASTIC_MPI_CHECK(MPI_Comm_get_parent(&parent));
  MPI_Comm own = MPI_COMM_NULL;
  ELASTIC_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &own));
  s.world = own;
  if (Status st = s.UpdateRankSize(); !st.ok()) return st;
  int own_size = s.size;
  // Only the job's rank 0 talks to elasticd: node group 0's rank 0 (or an extension's rank 0).
  if (s.rank == 0 && (s.options.join || s.options.node_group == 0) && !s.options.standalone && !s.options.rigid &&
      !s.options.controller.empty()) {
    auto link = ControllerLink::Create(s.options.controller, s.options.job_id, s.options.munge_socket);
    if (link.ok()) {
      s.link = std::move(link).value();
    } else {
      Log(LogLevel::kWarning, kComponent, "no link to elasticd: ", link.status().message());
    }
  }
  Status joined;
  if (parent != MPI_COMM_NULL) {
    // Spawned by a running world: merge behind the parents.
    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    MPI_Comm merged = MPI_COMM_NULL;
    ELASTIC_MPI_CHECK(MPI_Intercomm_merge(parent, 1, &merged));
    joined = s.AfterMerge(parent, merged);
  } else if (s.options.join) {
    joined = s.Join();
  } else {
    if (s.options.node_groups > 1) joined = s.MergeNodeGroups();
    s.groups.push_back({s.group_id, s.size, MPI_COMM_NULL});  // the base job: every node group
  }
  (void)own_size;
  if (!joined.ok()) return joined;
  if (!s.options.relaunch_from.empty() && !s.newcomer && !s.options.join) {
    // A world started again by the launcher (relaunch.h): the old world's step, batch, statistics.
    if (Status st = s.RestoreMeta(); !st.ok()) return st;
  }
  if (s.options.global_batch == 0 && !s.newcomer && !s.relaunched) {
    // The per-rank batch over the initial world (a newcomer has the running world's batch from
    // the meta it received in its merge).
    s.global_batch = s.options.local_batch * static_cast<std::uint64_t>(s.size);
    s.base_batch = s.options.base_global_batch != 0 ? s.options.base_global_batch : s.global_batch;
  }
  // Probes of the liveness side channel: a peer that does not answer within 5 s is taken for gone
  // (its node failed); a live process answers from its responder thread in milliseconds.
  s.guard = std::make_unique<detail::CollectiveGuard>(s.options.collective_timeout_s, s.options.stall_timeout_s, 5.0);
  if (s.rank == 0) {
    if (!s.options.metrics_file.empty()) s.sinks.push_back(MakeJsonLinesSink(s.options.metrics_file));
    if (s.link && !s.newcomer) s.sinks.push_back(std::make_shared<ControllerSink>(s.link.get(), s.options.metrics_interval_s, s.options.total_samples));
  }
  Log(LogLevel::kVerbose, kComponent, "session: rank ", s.rank, " of ", s.size, ", group ", s.group_id,
      s.newcomer ? " (newcomer)" : "");
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Session::~Session() {
  Impl& s = *impl_;
  // A world that spans several launches (groups that joined by connect/accept or spawn) is
  // taken apart group by group, latest first, before MPI_Finalize: finalizing a merged world
  // lets each launch tear down its TCP links while the others still send (seen as a hang in
  // MPI_Finalize at the end of a job). Every rank reaches this point together at the end of
  // training; a watchdog keeps a missing rank from turning it into a silent hang.
  // The base job's node groups (one launch each) part the same way once the joined groups are
  // gone: finalizing a world of four node groups at once hung about one run in three on Open MPI
  // 4.1 ("mca_btl_tcp_frag_send: writev failed: Broken pipe", then rank 0 spinning in
  // opal_finalize).
  // After a stop (SIGTERM on the base group) the joined groups are not taken apart (each shrink
  // rebuilds the backend, within Slurm's KillWait), but the node groups still part (a split and
  // a disconnect each). A rank that comes late (rank 0 saving the model) is waited for under the
  // collective guard, which tells a busy rank from a dead one, before the watchdog's deadline.
  // Every rank of the world decides alike: the group list and `stop` are the same everywhere,
  // and with one group the world holds the base job's ranks alone, which all know its node groups.
  const bool node_groups = s.groups.size() == 1 && s.node_groups_present.size() > 1;
  const bool take_apart = s.stop ? node_groups : s.groups.size() > 1 || node_groups;
  if (s.begun && !s.left && s.world != MPI_COMM_NULL && take_apart) {
    if (s.guard) s.guard->Arm("the end of the job (every rank of the merged world)", s.step);
    const int waited = MPI_Barrier(s.world);
    if (s.guard) s.guard->Disarm();
    detail::Watchdog watchdog("leaving the merged world at the end of the job", s.options.connect_timeout_s);
    bool parted = waited == MPI_SUCCESS;
    while (parted && s.groups.size() > 1 && !s.left) {
      Status st = s.Shrink(s.groups.back().id);
      if (!st.ok()) {
        Log(LogLevel::kWarning, kComponent, "leaving the merged world at the end: ", st.message());
        parted = false;
        break;
      }
    }
    if (parted && !s.left && s.node_groups_present.size() > 1) {
      Status st = SeparateNodeGroups(s.options.node_group, s.node_groups_present, &s.world, &s.base_links);
      if (!st.ok()) Log(LogLevel::kWarning, kComponent, "parting the node groups at the end: ", st.message());
    }
  }
  s.backend.reset();
  if (s.world != MPI_COMM_NULL) MPI_Comm_free(&s.world);
  s.ReapLeftRequests(/*at_end=*/true);
  // Inter-communicators still connected (after a stop, or a failed shrink or parting) are left to
  // MPI_Finalize.
  if (s.own_mpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

void Session::RegisterBytes(const std::string& name, void* data, std::size_t bytes, MemorySpace space) {
  for (const Buffer& b : impl_->buffers) {
    if (b.name == name) throw Error(ErrorKind::kInvalidArgument, "state '" + name + "' registered twice");
  }
  if (impl_->begun) throw Error(ErrorKind::kInvalidArgument, "state '" + name + "' registered after Begin()");
  impl_->buffers.push_back({name, data, bytes, space});
}
void Session::RegisterFloats(const std::string& name, float* data, std::size_t count, MemorySpace space) {
  RegisterBytes(name, data, count * sizeof(float), space);
}
void Session::RegisterDoubles(const std::string& name, double* data, std::size_t count, MemorySpace space) {
  RegisterBytes(name, data, count * sizeof(double), space);
}
void Session::RegisterU64(const std::string& name, std::uint64_t* data, std::size_t count, MemorySpace space) {
  RegisterBytes(name, data, count * sizeof(std::uint64_t), space);
}

Status Session::Begin() {
  Impl& s = *impl_;
  if (s.begun) return Status(ErrorKind::kInvalidArgument, "Begin() called twice");
  s.begun = true;
  if (s.newcomer) {
    auto t = Clock::now();
    s.TestKillAt("state", s.pending_inter);
    if (Status st = s.ReceiveState(s.pending_inter); !st.ok()) return st;
    Log(LogLevel::kVerbose, kComponent, "newcomer received state in ", Seconds(t), " s");
  }
  // The parents are inside the rescale point that brought us in: our first RescalePoint() is
  // that same point, already done. So is a relaunched world's: the one before it ended there.
  s.joined_at_point = s.newcomer || s.relaunched;
  if (!s.newcomer) {
    if (s.relaunched) {
      auto t = Clock::now();
      if (Status st = s.RestoreBuffers(); !st.ok()) return st;
      if (s.rank == 0) Log(LogLevel::kVerbose, kComponent, "relaunched world restored its state in ", Seconds(t), " s");
    }
    return s.AfterWorldChange(0);
  }
  // Collective with the parents over the merged world, as their side of it (HandOver): if they
  // abandoned the grow after our "state received" (it came past their deadline), nobody else is
  // in this world and its collectives would wait forever; the watchdog ends them.
  detail::Watchdog watchdog("the first collectives in the grown world as group " + std::to_string(s.group_id) +
                                ", which the running world may have abandoned (rebind, liveness exchange, backend "
                                "grow; ELASTIC_GROW_PHASE_TIMEOUT_S)",
                            s.options.grow_phase_timeout_s);
  return s.AfterWorldChange(s.groups.back().size);
}

Status Session::SetInitialLocalBatch(std::uint64_t local_batch) {
  Impl& s = *impl_;
  if (local_batch == 0) return Status(ErrorKind::kInvalidArgument, "SetInitialLocalBatch: the batch must be > 0");
  if (s.global_batch != 0) return Status();
  s.global_batch = local_batch * static_cast<std::uint64_t>(s.size);
  s.base_batch = s.options.base_global_batch != 0 ? s.options.base_global_batch : s.global_batch;
  return Status();
}

Result<bool> Session::RescalePoint() {
  Impl& s = *impl_;
  if (!s.begun) return Status(ErrorKind::kInvalidArgument, "RescalePoint() before Begin()");
  if (s.global_batch == 0) {
    return Status(ErrorKind::kInvalidArgument,
                  "RescalePoint() without a global batch: the session was created with defer_batch; call "
                  "SetInitialLocalBatch(per-rank batch) before the first rescale point");
  }
  if (s.left || s.stop) return true;
  if (s.joined_at_point) {
    s.joined_at_point = false;
    return true;
  }
  s.ReapLeftRequests(/*at_end=*/false);
  const auto start = Clock::now();
  std::array<std::int64_t, 6> packet{};
  if (s.rank == 0) {
    const Decision d = s.Decide();
    packet = {static_cast<std::int64_t>(d.action), d.count, d.group, d.global_batch, 0, 0};
    if (s.checkpoint_requested) packet[5] = 1;
    if (s.options.checkpoint_interval_s > 0 && Seconds(s.last_checkpoint) >= s.options.checkpoint_interval_s) {
      packet[5] = 1;
    }
  }
  // Field 5: a checkpoint is wanted (SIGUSR1 on any rank: Slurm's time-limit warning; a command).
  if (g_checkpoint != 0) packet[5] = 1;
  // Field 4: 1 + the position (in join order) of the latest group that has a SIGTERMed rank.
  if (g_terminate != 0) {
    for (std::size_t i = 0; i < s.groups.size(); ++i) {
      if (s.groups[i].id == s.group_id) packet[4] = static_cast<std::int64_t>(i + 1);
    }
  }
  {
    detail::GuardScope guard(s.guard.get(), "the rescale point's allreduce", s.step);
    const int rc = MPI_Allreduce(MPI_IN_PLACE, packet.data(), 6, MPI_INT64_T, MPI_MAX, s.world);
    if (rc != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(rc, text, &len);
      Log(LogLevel::kError, kComponent, "the rescale point's allreduce at step ", s.step, " failed (",
          std::string(text, static_cast<std::size_t>(len)),
          "): a rank of the world died; the job must be restarted from its last checkpoint");
      return Status(ErrorKind::kUnavailable, "rescale point at step " + std::to_string(s.step) + ": " +
                                                 std::string(text, static_cast<std::size_t>(len)) +
                                                 " (a rank of the world died)");
    }
  }
  if (packet[5] != 0 && packet[4] <= 0) {
    // Checkpoint and go on (the base group's SIGTERM below writes its own and stops).
    g_checkpoint = 0;
    s.CheckpointAndGoOn();
  }
  int without = 0;  // > 0: ranks off the launcher's node alone got SIGTERM; the ranks left
  if (packet[4] > 0) {
    const std::size_t index = static_cast<std::size_t>(packet[4] - 1);
    if (index == 0 && s.relaunched) {
      if (Status st = s.WorldWithoutSignalledNodes(g_terminate != 0, &without); !st.ok()) return st;
    }
    if (index == 0 && without > 0) {
      // Their nodes are being taken away (the jobs that hold them end): the world is started
      // again without them, whatever rank 0 had decided (relaunch.cpp).
      if (s.rank == 0) s.PostponeCurrent();
      packet = {static_cast<std::int64_t>(Action::kRelaunch), without, 0, 0, 0, 0};
    } else if (index == 0) {
      // The base group cannot leave (its ranks are the job): stop everyone, with a checkpoint.
      s.CheckpointBeforeStop();
      if (s.rank == 0) Log(LogLevel::kWarning, kComponent, "SIGTERM on the base group: stopping");
      if (s.rank == 0) s.AckCurrent(false, "the job is stopping (SIGTERM)");
      s.stop = true;
      return true;
    } else {
      // A joined group got SIGTERM (the latest such group, when several did): it leaves now,
      // whatever rank 0 had decided; an older group leaves as well as the latest.
      packet = {static_cast<std::int64_t>(Action::kShrink), 0, s.groups[index].id, 0, 0, 0};
      if (s.rank == 0) {
        Log(LogLevel::kWarning, kComponent, "group ", s.groups[index].id, " got SIGTERM: it leaves");
        s.PostponeCurrent();
        s.signalled_leave = s.groups[index].id;
      }
    }
  }
  const auto action = static_cast<Action>(packet[0]);
  ++s.step;
  if (action == Action::kNone) return false;

  s.last = RescaleInfo{};
  s.last.old_size = s.size;
  s.last.old_batch = s.global_batch;
  s.last.group = static_cast<std::uint32_t>(packet[2]);
  // The new batch is in force before the hand-over, so newcomers receive it with the meta; a
  // failed change puts the old one back.
  if (packet[3] != 0) s.global_batch = static_cast<std::uint64_t>(packet[3]);
  Status status;
  bool changed = true;
  switch (action) {
    case Action::kSpawn:
      s.last.what = "grow";
      status = s.Spawn(static_cast<int>(packet[1]), static_cast<std::uint32_t>(packet[2]));
      break;
    case Action::kAccept: {
      s.last.what = "join";
      bool joined = false;
      std::string refusal;
      status = s.Accept(static_cast<std::uint32_t>(packet[2]), &joined, &refusal);
      if (status.ok() && !joined) {
        s.last.ok = false;
        s.last.error = refusal;
        changed = false;
      }
      break;
    }
    case Action::kShrink:
      s.last.what = "shrink";
      status = s.Shrink(static_cast<std::uint32_t>(packet[2]));
      break;
    case Action::kBatch:
      s.last.what = "batch";
      break;
    case Action::kRelaunch: {
      s.last.what = "relaunch";
      std::string refusal;
      status = s.Relaunch(static_cast<int>(packet[1]), &refusal);
      if (status.ok() && !refusal.empty()) {  // not handed over: a failed ack, the world goes on
        s.last.ok = false;
        s.last.error = refusal;
        changed = false;
      }
      break;
    }
    case Action::kNone:
      break;
  }
  if (!status.ok() || !changed) s.global_batch = s.last.old_batch;
  if (without > 0 && !s.stop) {
    // A relaunch without the SIGTERMed nodes that could not hand the state over: the ranks there
    // end soon, and the world with them. Stop with a checkpoint, as on SIGTERM on the base group.
    s.CheckpointBeforeStop();
    s.stop = true;
    return true;
  }
  if (!status.ok()) {
    s.last.ok = false;
    s.last.error = status.message();
    if (s.rank == 0) s.AckCurrent(false, status.message());
    return status;
  }
  s.last.new_size = action == Action::kRelaunch && changed ? static_cast<int>(packet[1]) : s.left ? 0 : s.size;
  s.last.new_batch = s.global_batch;
  s.last.pause_s = Seconds(start);
  if (s.rank == 0 && !s.left) {
    Log(LogLevel::kInfo, kComponent, s.last.what, s.last.ok ? "" : " FAILED", " at step ", s.step, ": ",
        s.last.old_size, " -> ", s.last.new_size, " ranks, batch ", s.last.old_batch, " -> ",
        s.last.new_batch, ", lr factor ", s.LrFactorAt(s.last.old_batch), " -> ", s.LrFactorAt(s.last.new_batch),
        ", pause ", s.last.pause_s, " s");
    for (const auto& sink : s.sinks) sink->OnRescale(s.last.what, s.size, s.last.pause_s);
    if (action == Action::kRelaunch && changed) {
      s.current_command.reset();  // acknowledged by the world started again (relaunch.cpp)
    } else {
      s.AckCurrent(s.last.ok, s.last.error);
    }
    if (s.signalled_leave != 0 && s.link) {  // a group left on SIGTERM: elasticd did not ask for it
      s.link->Call({{"type", "left"}, {"group", s.signalled_leave}, {"reason", "SIGTERM"}});
    }
    s.signalled_leave = 0;
  }
  return changed;
}

bool Session::left() const noexcept { return impl_->left; }
bool Session::should_stop() const noexcept { return impl_->left || impl_->stop; }
bool Session::newcomer() const noexcept { return impl_->newcomer; }
bool Session::relaunched() const noexcept { return impl_->relaunched; }
MPI_Comm Session::world() const noexcept { return impl_->world; }
int Session::rank() const noexcept { return impl_->rank; }
int Session::size() const noexcept { return impl_->size; }
std::uint32_t Session::group_id() const noexcept { return impl_->group_id; }
std::uint64_t Session::step() const noexcept { return impl_->step; }
std::uint64_t Session::global_batch() const noexcept { return impl_->global_batch; }
std::uint64_t Session::local_batch() const noexcept {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  if (impl_->size <= 0) return 0;
  EpochSharder::SliceOf(impl_->global_batch, impl_->rank, impl_->size, &begin, &end);
  return end - begin;
}
double Session::lr_factor() const {
  return LrFactor(impl_->options.lr_rule, static_cast<double>(impl_->global_batch),
                  static_cast<double>(impl_->base_batch), impl_->noise);
}
const GradientNoise& Session::gradient_noise() const noexcept { return impl_->noise; }
const RescaleInfo& Session::last_rescale() const noexcept { return impl_->last; }
const SessionOptions& Session::options() const noexcept { return impl_->options; }

CollectiveBackend& Session::backend() {
  if (!impl_->backend) throw Error(ErrorKind::kInternal, "Session::backend() before Begin()");
  return *impl_->backend;
}

namespace {
template <typename T>
double SquaredNorm(std::span<const T> v) {
  double sqr = 0;
  for (T x : v) sqr += static_cast<double>(x) * static_cast<double>(x);
  return sqr;
}
}  // namespace

Status Session::ObserveGradientNorms(double local_sqr, std::uint64_t local_count, double global_sqr) {
  Impl& s = *impl_;
  // A rank whose norm is not a number contributes nothing (the allreduce still happens: it is
  // collective); a global norm that is not one (an overflowed mixed-precision step, the same on
  // every rank) updates nothing.
  if (!std::isfinite(local_sqr) || local_sqr < 0) local_count = 0;
  // {sum_i b_i |g_i|^2, B, ranks with samples}
  std::array<double, 3> sums = {local_count > 0 ? static_cast<double>(local_count) * local_sqr : 0.0,
                                static_cast<double>(local_count), local_count > 0 ? 1.0 : 0.0};
  {
    detail::GuardScope guard(s.guard.get(), "the gradient-statistics allreduce", s.step);
    ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums.data(), 3, MPI_DOUBLE, MPI_SUM, s.world));
  }
  if (std::isfinite(global_sqr) && global_sqr >= 0) {
    s.noise.Observe(sums[0], global_sqr, sums[1], static_cast<int>(sums[2]));
  }
  return Status::Ok();
}

Status Session::ObserveGradients(std::span<const double> local_mean, std::uint64_t local_count,
                                 std::span<const double> global_mean) {
  if (local_mean.size() != global_mean.size()) {
    return Status(ErrorKind::kInvalidArgument, "ObserveGradients: local and global sizes differ");
  }
  return ObserveGradientNorms(SquaredNorm(local_mean), local_count, SquaredNorm(global_mean));
}
Status Session::ObserveGradients(std::span<const float> local_mean, std::uint64_t local_count,
                                 std::span<const float> global_mean) {
  if (local_mean.size() != global_mean.size()) {
    return Status(ErrorKind::kInvalidArgument, "ObserveGradients: local and global sizes differ");
  }
  return ObserveGradientNorms(SquaredNorm(local_mean), local_count, SquaredNorm(global_mean));
}

void Session::ReportStep(double step_time_s, std::uint64_t samples_in_step) {
  Impl& s = *impl_;
  s.samples += samples_in_step;
  if (s.rank != 0 || s.sinks.empty()) return;
  StepMetrics m;
  m.step = s.step;
  m.gpus = s.size;
  m.global_batch = s.global_batch;
  m.local_batch = local_batch();
  m.step_time_s = step_time_s;
  m.grad_sqr = s.noise.grad_sqr();
  m.grad_var = s.noise.grad_var();
  m.samples = s.samples;
  m.lr_factor = lr_factor();
  for (const auto& sink : s.sinks) sink->OnStep(m);
}

void Session::AddMetricsSink(std::shared_ptr<MetricsSink> sink) {
  if (impl_->rank == 0 && sink) impl_->sinks.push_back(std::move(sink));
}

}  // namespace elastic::mpi
