// Relaunch at a rescale point (relaunch.h; docs/runtime.md, "Relaunch"): the world hands its
// state to a file and stops, and elastic-launch starts it again over other nodes, where the MPI
// runtime cannot grow or shrink the running world in place (Open MPI 5.0's DVM: growth onto
// another node works once per node, and a node's daemon never leaves; docs/interfaces.md section 5).
// The new world takes the old one's step, batch and statistics (Create) and its registered state
// (Begin) from the old rank 0's files, like newcomers that receive both from a running world.
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "check.h"
#include "memory_space.h"
#include "relaunch.h"
#include "session_impl.h"

namespace elastic::mpi {

using detail::kComponent;

namespace {

// Rank 0's verdict and its message, to every rank of comm.
Status Agree(bool ok, const std::string& error, int rank, MPI_Comm comm, ErrorKind kind) {
  int word = ok ? 1 : 0;
  ELASTIC_MPI_CHECK(MPI_Bcast(&word, 1, MPI_INT, 0, comm));
  if (word != 0) return Status::Ok();
  return Status(kind, rank == 0 ? error : "rank 0: " + (error.empty() ? std::string("see rank 0's log") : error));
}

// Bytes from rank 0 to every rank, in pieces MPI's int counts can hold.
Status BcastAll(void* data, std::size_t bytes, MPI_Comm comm) {
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  auto* p = static_cast<char*>(data);
  for (std::size_t done = 0; done < bytes; done += kChunk) {
    const std::size_t n = std::min(kChunk, bytes - done);
    ELASTIC_MPI_CHECK(MPI_Bcast(p + done, static_cast<int>(n), MPI_BYTE, 0, comm));
  }
  return Status::Ok();
}

// Free bytes for an unprivileged writer in the file system of `dir`; 0 when unknown.
std::uint64_t FreeBytes(const std::string& dir) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) return 0;
  return static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
}

// Where rank 0 puts the state: memory-backed storage when this node has it with room for the
// state and a margin (the file lives only between the two worlds; its memory is the job's), else
// the run directory; "" with *why when neither has room.
std::string StatePath(const SessionOptions& o, std::uint64_t step, std::uint64_t bytes, std::string* why) {
  std::string name = "elastic-relaunch." + o.job_id + "." + std::to_string(getpid()) + "." + std::to_string(step);
  std::replace(name.begin(), name.end(), '/', '_');
  const std::uint64_t need = bytes + bytes / 16 + (std::uint64_t{1} << 20);
  struct stat st {};
  const bool shm = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0;
  if (shm && FreeBytes("/dev/shm") >= need) return "/dev/shm/" + name;
  if (FreeBytes(o.run_dir) >= need) return o.run_dir + "/" + name;
  *why = "no room for the state (" + std::to_string(bytes) + " bytes and a margin): " +
         (shm ? "/dev/shm has " + std::to_string(FreeBytes("/dev/shm")) + " bytes free, " : std::string()) +
         o.run_dir + " " + std::to_string(FreeBytes(o.run_dir));
  return "";
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

nlohmann::json Session::Impl::WorldAsRecord(const nlohmann::json& next) const {
  if (!relaunched_world.empty()) {  // started by a relaunch: as its record names it
    nlohmann::json as_started = nlohmann::json::parse(relaunched_world, nullptr, false);
    auto ranks = RelaunchWorldRanks(as_started);
    return ranks.ok() && ranks.value() == size ? as_started : nlohmann::json();
  }
  // The launcher's first world: every rank on its node (a world of several node groups, of joined
  // groups or of one launch over several nodes is not relaunched: controller_commands.cpp), which
  // the next world names as the node without an agent.
  auto nodes = ParseRelaunchWorld(next);
  if (!nodes.ok()) return nlohmann::json();
  for (const RelaunchNode& n : nodes.value()) {
    if (n.agent.empty()) return nlohmann::json::array({{{"node", n.node}, {"ranks", size}}});
  }
  return nlohmann::json();
}

Status Session::Impl::Relaunch(int new_size, std::string* refusal) {
  std::string state;
  std::string error;
  if (rank == 0) {
    const std::string record = options.run_dir + "/" + kRelaunchRecord;
    const std::string tmp = record + ".tmp";
    if (options.run_dir.empty()) {
      error = "a relaunch needs the job's run directory (ELASTIC_RUN_DIR), where elastic-launch reads its record";
    } else {
      state = StatePath(options, step, CheckpointBytes(), &error);
    }
    if (error.empty()) {
      if (Status w = WriteCheckpointFile(state); !w.ok()) error = w.message();
    }
    if (error.empty()) {
      nlohmann::json j{{"world", nlohmann::json::parse(relaunch_world)},
                       {"state", state},
                       {"from_ranks", size},
                       {"ranks", new_size},
                       {"stopped_at", WallSeconds()},
                       // elasticd's command: the world started again acknowledges it, once it
                       // holds the state (RestoreBuffers), not this one as it stops.
                       {"command", current_command ? current_command->id : 0},
                       {"meta", nlohmann::json::parse(MetaJson(0))}};
      // Nodes taken away: the launcher starts this world even though the old one may end with
      // an error (its daemons there end with them).
      if (!relaunch_left_nodes.empty()) j["left_nodes"] = relaunch_left_nodes;
      // Otherwise this world as a relaunch's world: the launcher starts it again as it is when the
      // new one ends before it took the state (a daemon on a new node that could not start;
      // relauncher.h, FallBack), and that world acknowledges the command failed.
      else if (nlohmann::json from = WorldAsRecord(j["world"]); !from.is_null()) j["from_world"] = std::move(from);
      {
        std::ofstream out(tmp, std::ios::trunc);
        out << j.dump() << "\n";
        out.flush();
        if (!out) error = "cannot write " + tmp + ": " + (errno != 0 ? std::strerror(errno) : "the write failed");
      }
      if (error.empty() && std::rename(tmp.c_str(), record.c_str()) != 0) {
        error = "cannot rename " + tmp + " to " + record + ": " + std::strerror(errno);
      }
      if (!error.empty()) {  // nothing left behind: the world goes on as before
        std::remove(tmp.c_str());
        std::remove(state.c_str());
      }
    }
  }
  int handed = error.empty() ? 1 : 0;
  ELASTIC_MPI_CHECK(MPI_Bcast(&handed, 1, MPI_INT, 0, world));
  if (handed == 0) {
    *refusal = "relaunch not done, the world goes on: " +
               (rank == 0 ? error : std::string("rank 0 could not hand the state over (see its log)"));
    if (rank == 0) Log(LogLevel::kWarning, kComponent, *refusal);
    return Status::Ok();
  }
  if (rank == 0) {
    Log(LogLevel::kVerbose, kComponent, "the world stops for a relaunch at ", new_size, " ranks; its state is in ",
        state, " (", kRelaunchRecord, ")");
  }
  stop = true;
  return Status::Ok();
}

// A node of a relaunched world is held by another Slurm job (elasticd's extension), which may
// end from outside: scancel, preemption, its time limit. Its ranks get SIGTERM, and soon after
// its daemon ends, and with it the world. They are not the job's end: the world is started again
// without those nodes at once, from the state in memory (docs/runtime.md, "A node taken away").
Status Session::Impl::WorldWithoutSignalledNodes(bool signalled, int* ranks_left) {
  *ranks_left = 0;
  constexpr int kName = 256;
  std::array<char, kName> mine{};
  if (signalled) std::snprintf(mine.data(), mine.size(), "%s", ThisNodeName().c_str());
  std::vector<char> all(rank == 0 ? static_cast<std::size_t>(kName) * static_cast<std::size_t>(size) : 0);
  ELASTIC_MPI_CHECK(MPI_Gather(mine.data(), kName, MPI_CHAR, all.data(), kName, MPI_CHAR, 0, world));
  int ranks = 0;
  if (rank == 0) {
    std::set<std::string> signalled_nodes;
    for (int r = 0; r < size; ++r) {
      const char* name = all.data() + static_cast<std::size_t>(r) * kName;
      if (name[0] != '\0') signalled_nodes.insert(std::string(name, strnlen(name, kName)));
    }
    auto nodes = ParseRelaunchWorld(nlohmann::json::parse(relaunched_world.empty() ? "null" : relaunched_world,
                                                          nullptr, false));
    std::string why;
    nlohmann::json kept = nlohmann::json::array();
    nlohmann::json gone = nlohmann::json::array();
    if (!nodes.ok()) why = "this world's record has no usable world: " + nodes.status().message();
    for (const RelaunchNode& n : nodes.ok() ? nodes.value() : std::vector<RelaunchNode>{}) {
      if (!signalled_nodes.count(n.node)) {
        nlohmann::json e{{"node", n.node}, {"ranks", n.ranks}};
        if (!n.agent.empty()) e["agent"] = n.agent;
        kept.push_back(std::move(e));
        ranks += n.ranks;
        continue;
      }
      signalled_nodes.erase(n.node);
      if (n.agent.empty()) why = "ranks on the launcher's node " + n.node + " got it (the job itself ends)";
      gone.push_back(n.node);
    }
    if (why.empty() && !signalled_nodes.empty()) {
      why = "ranks on " + *signalled_nodes.begin() + ", a node this world's record does not name, got it";
    }
    if (!why.empty() || gone.empty()) {
      Log(LogLevel::kVerbose, kComponent, "SIGTERM: the job stops (", why.empty() ? "no node to leave" : why, ")");
      ranks = 0;
    } else {
      Log(LogLevel::kWarning, kComponent, "SIGTERM to the ranks on ", gone.dump(),
          ": the job that holds the node ends (scancel, preemption or its time limit); the world is started again "
          "without it, ", size, " -> ", ranks, " ranks");
      relaunch_world = kept.dump();
      relaunch_left_nodes = gone;
    }
  }
  ELASTIC_MPI_CHECK(MPI_Bcast(&ranks, 1, MPI_INT, 0, world));
  *ranks_left = ranks;
  return Status::Ok();
}

Status Session::Impl::RestoreMeta() {
  std::string meta;
  std::string error;
  if (rank == 0) {
    std::ifstream in(options.relaunch_from);
    std::stringstream text;
    text << in.rdbuf();
    try {
      if (!in) throw std::runtime_error("cannot read it");
      const auto j = nlohmann::json::parse(text.str());
      meta = j.at("meta").dump();
      relaunched_state = j.at("state").get<std::string>();
      relaunched_world = j.at("world").dump();
      relaunch_stopped_at = j.value("stopped_at", 0.0);
      relaunch_command = j.value("command", std::int64_t{0});
      relaunch_failed = j.value("failed", std::string());
    } catch (const std::exception& e) {
      error = "the relaunch record " + options.relaunch_from + ": " + e.what();
    }
  }
  if (Status s = Agree(error.empty(), error, rank, world, ErrorKind::kNotFound); !s.ok()) return s;
  std::uint64_t len = meta.size();
  ELASTIC_MPI_CHECK(MPI_Bcast(&len, 1, MPI_UINT64_T, 0, world));
  meta.resize(len);
  if (Status s = BcastAll(meta.data(), len, world); !s.ok()) return s;
  try {
    const auto j = nlohmann::json::parse(meta);
    ApplyProgress(j);
    pending_manifest = j.at("buffers");
  } catch (const std::exception& e) {
    return Status(ErrorKind::kProtocol, "the relaunch record " + options.relaunch_from + ": malformed meta: " + e.what());
  }
  relaunched = true;
  if (rank == 0 && !relaunch_failed.empty()) {
    Log(LogLevel::kWarning, kComponent, "relaunch FAILED (", relaunch_failed, "): the world before it is started again "
        "as it was, ", size, " ranks at step ", step);
  } else if (rank == 0) {
    Log(LogLevel::kInfo, kComponent, "relaunched world of ", size, " ranks at step ", step);
  }
  return Status::Ok();
}

Status Session::Impl::RestoreBuffers() {
  // Every rank's registration must match the old rank 0's, in order (as a newcomer's).
  bool match = pending_manifest.size() == buffers.size();
  for (std::size_t i = 0; match && i < buffers.size(); ++i) {
    match = pending_manifest[i].at(0).get<std::string>() == buffers[i].name &&
            pending_manifest[i].at(1).get<std::size_t>() == buffers[i].bytes;
  }
  int all = match ? 1 : 0;
  ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, world));
  if (all == 0) {
    std::string mine;
    for (const Buffer& b : buffers) mine += b.name + ":" + std::to_string(b.bytes) + " ";
    return Status(ErrorKind::kInternal, "relaunch: registered state differs from the world's before it: it had " +
                                            pending_manifest.dump() + (match ? "" : ", this rank has " + mine));
  }
  Status read = rank == 0 ? ReadCheckpoint(relaunched_state) : Status::Ok();
  if (Status s = Agree(read.ok(), read.message(), rank, world, read.kind()); !s.ok()) return s;
  // Every rank's host views first, agreed on, so that no rank leaves the broadcasts alone.
  std::vector<detail::HostView> views;
  Status local;
  for (Buffer& b : buffers) {
    auto view = detail::HostView::Of(b.data, b.bytes, b.space, /*fill=*/rank == 0);
    if (!view.ok()) {
      local = view.status();
      break;
    }
    views.push_back(std::move(view).value());
  }
  int ok = local.ok() ? 1 : 0;
  ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, world));
  if (ok == 0) return local.ok() ? Status(ErrorKind::kInternal, "relaunch: another rank could not stage its state") : local;
  for (std::size_t i = 0; i < views.size(); ++i) {
    if (Status s = BcastAll(views[i].data(), buffers[i].bytes, world); !s.ok()) return s;
    if (rank != 0 && local.ok()) local = views[i].WriteBack();
  }
  ok = local.ok() ? 1 : 0;
  ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, world));
  if (ok == 0) return local.ok() ? Status(ErrorKind::kInternal, "relaunch: another rank could not take its state") : local;
  if (rank == 0) {
    unlink(relaunched_state.c_str());  // taken: the memory it held is free again
    // The pause the relaunch cost: from the old world's stop to this world's state in place.
    const double pause = relaunch_stopped_at > 0 ? WallSeconds() - relaunch_stopped_at : 0.0;
    if (!relaunch_failed.empty()) {
      Log(LogLevel::kWarning, kComponent, "relaunch undone: the world goes on as before it, ", size, " ranks at step ",
          step, ", pause ", pause, " s");
    } else {
      Log(LogLevel::kInfo, kComponent, "relaunch done: ", size, " ranks at step ", step, ", pause ", pause, " s");
    }
    if (relaunch_command > 0) {
      // elasticd's relaunch is done now: the world is up over its new nodes with the state (the
      // world before it did not acknowledge it, so that elasticd lets no node go before its ranks
      // there ended). Delivered again, it is acknowledged again, not done again.
      last = RescaleInfo{};
      last.what = "relaunch";
      last.new_size = size;
      last.new_batch = global_batch;
      last.pause_s = pause;
      Command done;
      done.id = relaunch_command;
      done.action = "relaunch";
      seen_commands.insert(relaunch_command);
      // Undone (the world before it started again): failed, and elasticd ends the groups it named.
      SendAck(done, relaunch_failed.empty(),
              relaunch_failed.empty() ? "" : "relaunch failed (" + relaunch_failed + "); the world goes on as before, " +
                                                 std::to_string(size) + " ranks");
      last = RescaleInfo{};  // no change of this world's: a later stop is not a relaunch's
    }
  }
  return Status::Ok();
}

}  // namespace elastic::mpi
