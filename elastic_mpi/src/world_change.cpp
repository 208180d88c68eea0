// How the world changes: a spawned or joining group is merged behind it, any joined group leaves,
// and after every change each rank rebinds and rebuilds its collective backend. The
// rendezvous (rendezvous.h) finds and checks the other side; the hand-over (handover.cpp) moves
// the state.
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "backend_guarded.h"
#include "check.h"
#include "elastic_mpi/join.h"
#include "elastic_mpi/topology.h"
#include "memory_space.h"
#include "session_impl.h"

namespace elastic::mpi {

using detail::Clock;
using detail::kComponent;
using detail::Seconds;
using detail::kTagMergeReady;
using detail::kTagStateReceived;

namespace {

// The program and arguments of this process, for MPI_Comm_spawn.
std::vector<std::string> OwnCommandLine() {
  std::vector<std::string> argv;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(in, arg, '\0')) argv.push_back(arg);
  std::array<char, 4096> exe{};
  const ssize_t n = readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (n > 0 && !argv.empty()) argv[0].assign(exe.data(), static_cast<std::size_t>(n));
  return argv;
}

}  // namespace

// Replaces the world by `merged` (freeing the old one) and updates rank and size.
Status Session::Impl::AdoptWorld(MPI_Comm merged) {
  if (world != MPI_COMM_NULL) ELASTIC_MPI_CHECK(MPI_Comm_free(&world));
  world = merged;
  return UpdateRankSize();
}

// Collective over the new world, identical on parents and newcomers: bind to this rank's share
// of the node, then bring the collective backend to the new world: created at the start; after
// a grow (newcomers > 0: the world's last ranks) the parents' backend grows in place and the
// newcomers' joins it (backend.h).
Status Session::Impl::AfterWorldChange(int newcomers) {
  if (options.bind) Bind();
  if (Status s = ExchangeLiveness(); !s.ok()) return s;
  if (newcomers > 0 && backend) return backend->Grow(world, newcomers);
  backend.reset();
  // Ranks of one MPI launch (a node group of the base job, a spawned or joined group) share a
  // key: the MPI backend then reduces over shared memory within each launch first.
  const int key = group_id == 0 ? options.node_group : 65536 + static_cast<int>(group_id);
  BackendOptions made_as{options.backend, options.hierarchical_allreduce ? key : -1, options.nccl_timeout_s,
                         options.device_numbering};
  if (newcomers > 0) made_as.locality_key = key;
  for (const Buffer& b : buffers) {  // the program's state is on its device: NCCL uses that one
    if (b.space == MemorySpace::kDevice && made_as.device < 0) made_as.device = detail::DeviceOf(b.data);
  }
  auto made = newcomers > 0 ? JoinGrownBackend(world, newcomers, made_as) : MakeBackend(world, made_as);
  if (!made.ok()) return made.status();
  backend = std::make_unique<GuardedBackend>(std::move(made).value(), guard.get(), &step);
  return Status::Ok();
}

// Collective over the world after every change: where each rank's liveness responder listens,
// with fresh secrets (liveness.h), for the collective guard's probes.
Status Session::Impl::ExchangeLiveness() {
  std::vector<detail::PeerAddress> peers;
  const detail::PeerAddress mine = guard ? guard->RenewAddress() : detail::OwnAddress();
  if (Status s = detail::ExchangeAddresses(world, mine, &peers); !s.ok()) return s;
  if (guard) guard->SetPeers(std::move(peers), rank);
  return Status::Ok();
}

// Binds this rank to its share of the node, counting every rank of the world on this node.
void Session::Impl::Bind() {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS) return;
  int node_rank = 0;
  int node_size = 1;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  auto bound = BindToShare(node_rank, node_size);
  if (bound.ok()) {
    Log(LogLevel::kDebug, kComponent, "rank ", rank, " bound to cores ", bound.value());
  } else {
    Log(LogLevel::kVerbose, kComponent, "binding skipped: ", bound.status().message());
  }
}

// Parents' side of a grow by spawn: count new ranks of this program, merged behind the world.
Status Session::Impl::Spawn(int count, std::uint32_t new_group) {
  if (shrunk_before && options.respawn_delay_s > 0) {
    // Spawning right after leavers exit can hang in PMIx (openpmix issue 2735): wait a little.
    const double wait = options.respawn_delay_s - Seconds(last_shrink);
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
  std::vector<std::string> command = options.spawn_command.empty() ? OwnCommandLine() : options.spawn_command;
  if (command.empty()) return Status(ErrorKind::kInternal, "no command line to spawn");
  std::vector<char*> args;
  for (std::size_t i = 1; i < command.size(); ++i) args.push_back(command[i].data());
  args.push_back(nullptr);
  auto t = Clock::now();
  MPI_Comm inter = MPI_COMM_NULL;
  std::vector<int> errcodes(static_cast<std::size_t>(count), MPI_SUCCESS);
  {
    detail::Watchdog watchdog("MPI_Comm_spawn of " + std::to_string(count) + " ranks", options.spawn_timeout_s);
    ELASTIC_MPI_CHECK(MPI_Comm_spawn(command[0].c_str(), args.data(), count, MPI_INFO_NULL, 0, world,
                                     &inter, errcodes.data()));
  }
  last.phases["spawn"] = Seconds(t);
  t = Clock::now();
  MPI_Comm merged = MPI_COMM_NULL;
  {
    detail::Watchdog watchdog("the merge with the spawned group (ELASTIC_GROW_PHASE_TIMEOUT_S)",
                              options.grow_phase_timeout_s);
    ELASTIC_MPI_CHECK(MPI_Intercomm_merge(inter, 0, &merged));  // parents first: keep ranks 0..P-1
  }
  last.phases["merge"] = Seconds(t);
  std::string abandoned;
  if (Status s = HandOver(inter, merged, new_group, count, &abandoned); !s.ok()) return s;
  if (!abandoned.empty()) return Status(ErrorKind::kTimeout, "grow by spawn " + abandoned);
  return Status::Ok();
}

// Parents: a grow that missed a phase's deadline is dropped; the world, its backend and its
// groups are those of before (the old world was never freed). The inter-communicator and the
// merged world are freed, not disconnected: a disconnect waits for the other side.
Status Session::Impl::Abandon(MPI_Comm* inter, MPI_Comm* merged, std::uint32_t group, const std::string& why,
                              std::string* abandoned) {
  *abandoned = "abandoned: " + why;
  if (rank == 0) {
    Log(LogLevel::kError, kComponent, "join of group ", group, " ", *abandoned,
        " (ELASTIC_GROW_PHASE_TIMEOUT_S ", options.grow_phase_timeout_s, " s); the world keeps its ", size, " ranks");
  }
  if (*merged != MPI_COMM_NULL) MPI_Comm_free(merged);
  if (*inter != MPI_COMM_NULL) MPI_Comm_free(inter);
  return Status::Ok();
}

// Parents' side after a merge: send meta and state to the newcomers, wait (by the deadline) for
// their confirmation, adopt the merged world and grow the backend. *abandoned says why when the
// newcomers missed the hand-over's deadline (the world then keeps its size).
Status Session::Impl::HandOver(MPI_Comm inter, MPI_Comm merged, std::uint32_t new_group, int count,
                               std::string* abandoned) {
  auto t = Clock::now();
  // The deadline covers the newcomers' own set-up between Session::Create and Begin() (where
  // they receive the buffers) besides the transfer.
  const Clock::time_point deadline = detail::After(options.grow_phase_timeout_s);
  Status sent = SendState(inter, new_group, deadline);
  if (!sent.ok() && sent.kind() != ErrorKind::kTimeout) return sent;
  bool confirmed = false;
  if (Status s = AwaitNewcomers(inter, kTagStateReceived, sent.ok() ? deadline : Clock::now() - Clock::duration(1),
                                &confirmed);
      !s.ok()) {
    return s;
  }
  last.phases["state"] = Seconds(t);
  if (!confirmed) return Abandon(&inter, &merged, new_group, "the state hand-over did not finish in time", abandoned);
  if (new_group >= next_group_id) next_group_id = new_group + 1;
  groups.push_back({new_group, count, inter});
  if (Status s = AdoptWorld(merged); !s.ok()) return s;
  t = Clock::now();
  {
    // Collective with the newcomers over the new world: nothing here can be abandoned any more
    // (the old world is gone), so a newcomer that dies now ends the world, in bounded time.
    detail::Watchdog watchdog("the backend grow with group " + std::to_string(new_group) +
                                  " (ELASTIC_GROW_PHASE_TIMEOUT_S)",
                              options.grow_phase_timeout_s);
    if (Status s = AfterWorldChange(count); !s.ok()) return s;
  }
  last.phases["rebuild"] = Seconds(t);
  return Status::Ok();
}

// Accepts one joining group on a freshly published port; checks its token; merges it and hands
// the state over, each phase under its deadline. Returns ok with joined=false when the joiner
// was refused, never came or missed a deadline (the world keeps its size; *refusal says why).
Status Session::Impl::Accept(std::uint32_t group, bool* joined, std::string* refusal) {
  *joined = false;
  auto t = Clock::now();
  MPI_Comm inter = MPI_COMM_NULL;
  bool accepted = false;
  const std::string token = expected_token;
  expected_token.assign(expected_token.size(), '\0');  // a token is used once
  expected_token.clear();
  Status st =
      rendezvous->Accept(world, JoinServiceName(options.job_id, group), group, token, &inter, &accepted, refusal);
  last.phases["accept"] = Seconds(t);
  if (!st.ok() || !accepted) return st;
  t = Clock::now();
  MPI_Comm merged = MPI_COMM_NULL;
  bool ready = false;
  if (Status s = AwaitNewcomers(inter, kTagMergeReady, detail::After(options.grow_phase_timeout_s), &ready); !s.ok()) {
    return s;
  }
  if (!ready) return Abandon(&inter, &merged, group, "the joiner did not reach the merge in time", refusal);
  {
    detail::Watchdog watchdog("the merge with group " + std::to_string(group) + " (ELASTIC_GROW_PHASE_TIMEOUT_S)",
                              options.grow_phase_timeout_s);
    ELASTIC_MPI_CHECK(MPI_Intercomm_merge(inter, 0, &merged));
  }
  last.phases["merge"] = Seconds(t);
  int remote = 0;
  ELASTIC_MPI_CHECK(MPI_Comm_remote_size(inter, &remote));
  if (Status s = HandOver(inter, merged, group, remote, refusal); !s.ok()) return s;
  *joined = refusal->empty();
  return Status::Ok();
}

// Group `group` (any joined group, not only the last) leaves. The world's ranks are ordered by
// group, in join order, so its ranks are one contiguous range. Survivors split and everyone frees
// the merged world (disconnecting it hangs in Open MPI 4.1.4: notes/mpi-dynamic-processes.md).
// Every group h's inter-communicator links the ranks of groups 0..h (parents: the groups before
// h; remote side: group h), so the leaving group is a member of its own and of every later
// group's: all of those are disconnected, latest first, each by exactly its members (a rank takes
// part in those of its own group and later ones; the same order everywhere, so no rank waits on
// another that waits on it). The survivors' backend then shrinks, dropping the leavers wherever
// they are. The later groups stay in the world without an inter-communicator of their own: they
// leave later by the split alone (a null inter-communicator is skipped), as at the end of the job.
Status Session::Impl::Shrink(std::uint32_t group) {
  std::size_t index = 0;  // of the leaving group; 0: not a joined group (the base group never leaves)
  std::size_t own = 0;    // of this rank's group
  int first = 0;          // the leaving group's first rank in the world
  for (std::size_t i = 0, ranks = 0; i < groups.size(); ++i) {
    if (groups[i].id == group && i > 0) {
      index = i;
      first = static_cast<int>(ranks);
    }
    if (groups[i].id == group_id) own = i;
    ranks += static_cast<std::size_t>(groups[i].size);
  }
  if (index == 0) {
    return Status(ErrorKind::kInternal, "shrink of group " + std::to_string(group) +
                                            ", which is not a joined group of this world (the base group cannot leave)");
  }
  auto t = Clock::now();
  const bool leaving = group_id == group;
  std::vector<int> leavers(static_cast<std::size_t>(groups[index].size));
  for (std::size_t i = 0; i < leavers.size(); ++i) leavers[i] = first + static_cast<int>(i);
  MPI_Comm survivors = MPI_COMM_NULL;
  ELASTIC_MPI_CHECK(MPI_Comm_split(world, leaving ? MPI_UNDEFINED : 0, rank, &survivors));
  ELASTIC_MPI_CHECK(MPI_Comm_free(&world));
  last.phases["split"] = Seconds(t);
  t = Clock::now();
  {
    detail::Watchdog watchdog("disconnect of group " + std::to_string(group) + " (its inter-communicator and those "
                                  "of the " + std::to_string(groups.size() - 1 - index) + " groups that joined after it)",
                              options.connect_timeout_s);
    for (std::size_t h = groups.size() - 1; h >= index; --h) {
      if (own <= h && groups[h].inter != MPI_COMM_NULL) ELASTIC_MPI_CHECK(MPI_Comm_disconnect(&groups[h].inter));
      groups[h].inter = MPI_COMM_NULL;
    }
  }
  last.phases["disconnect"] = Seconds(t);
  groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(index));
  if (leaving) {
    left = true;
    world = MPI_COMM_NULL;
    return backend ? backend->Shrink(MPI_COMM_NULL, leavers) : Status::Ok();
  }
  world = survivors;
  if (Status s = UpdateRankSize(); !s.ok()) return s;
  shrunk_before = true;
  last_shrink = Clock::now();
  t = Clock::now();
  if (options.bind) Bind();
  if (Status s = ExchangeLiveness(); !s.ok()) return s;
  if (Status s = backend->Shrink(world, leavers); !s.ok()) return s;
  last.phases["rebuild"] = Seconds(t);
  return Status::Ok();
}

// Tests of the grow's deadlines: a joiner's rank 0 SIGKILLs itself where ELASTIC_TEST_KILL_AT
// names (connect: after `ready`, before connecting; merge: accepted, before the merge; state:
// merged, before the registered buffers arrive); late-confirm: it receives the state but says so
// only after the parents' deadline (they abandon the grow; the joiner must not hang).
void Session::Impl::TestKillAt(std::string_view phase, MPI_Comm own_group) const {
  int own_rank = 0;
  MPI_Comm_rank(own_group, &own_rank);  // the group's own world, or its side of the inter-communicator
  if (options.test_kill_at != phase || own_rank != 0) return;
  if (phase == "late-confirm") {
    Log(LogLevel::kWarning, kComponent, "ELASTIC_TEST_KILL_AT=", phase, ": rank 0 of group ", group_id,
        " confirms the state past the deadline");
    std::this_thread::sleep_for(std::chrono::duration<double>(options.grow_phase_timeout_s + 2));
    return;
  }
  Log(LogLevel::kWarning, kComponent, "ELASTIC_TEST_KILL_AT=", phase, ": rank 0 of group ", group_id,
      " kills itself (SIGKILL)");
  std::fflush(stderr);
  std::raise(SIGKILL);
}

// A joining group (options.join) at Create(): connect through the rendezvous and merge.
Status Session::Impl::Join() {
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  if (rank == 0 && link) {
    // Tell elasticd this group is up: it then sends the parent the grow command.
    auto r = link->Call({{"type", "ready"}, {"group", options.group_id}});
    if (!r.ok()) Log(LogLevel::kWarning, kComponent, "could not tell elasticd this group is ready: ", r.status().message());
  }
  TestKillAt("connect", world);
  MPI_Comm inter = MPI_COMM_NULL;
  MPI_Comm merged = MPI_COMM_NULL;
  if (Status st = rendezvous->Connect(world, JoinServiceName(options.job_id, options.group_id), options.group_id,
                                      options.join_token, &inter);
      !st.ok()) {
    return st;
  }
  TestKillAt("merge", world);
  if (Status st = TellParents(inter, kTagMergeReady); !st.ok()) return st;
  {
    // Parents that gave up on us (we were late) never enter the merge.
    detail::Watchdog watchdog("the merge with the running world (ELASTIC_GROW_PHASE_TIMEOUT_S)",
                              options.grow_phase_timeout_s);
    ELASTIC_MPI_CHECK(MPI_Intercomm_merge(inter, 1, &merged));  // behind the running world's ranks
  }
  return AfterMerge(inter, merged);
}

// The base job's initial world from its node groups (rendezvous.h), at Create(): one world whose
// ranks are node group 0's, then node group 1's, ..., recorded as the one base group (id 0)
// that never leaves.
Status Session::Impl::MergeNodeGroups() {
  if (Status st = ::elastic::mpi::MergeNodeGroups(*rendezvous, options.job_id, options.node_group, options.node_groups,
                                                  options.join_token, &world, &base_links, &node_groups_present);
      !st.ok()) {
    return st;
  }
  return UpdateRankSize();
}

}  // namespace elastic::mpi
