// The leader launcher's relaunch (relauncher.h).
#include "relauncher.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "elastic/common/exit_codes.h"
#include "relaunch.h"

namespace elastic::launch {

namespace {

Result<nlohmann::json> ReadRecord(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status(ErrorKind::kNotFound, "cannot read " + path + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const std::exception& e) {
    return Status(ErrorKind::kInvalidArgument, path + ": " + e.what());
  }
}

}  // namespace

bool Relauncher::Asked() const {
  struct stat st {};
  return stat((s_.run_dir + "/" + mpi::kRelaunchRecord).c_str(), &st) == 0;
}

namespace {

// The SIGTERM marks in the run dir: sigterm.<node> (relaunch.h).
std::vector<std::string> Marks(const std::string& run_dir) {
  std::vector<std::string> nodes;
  DIR* d = opendir(run_dir.c_str());
  if (d == nullptr) return nodes;
  const std::string prefix = mpi::kSignalledPrefix;
  while (const struct dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0) {
      nodes.push_back(name.substr(prefix.size()));
    }
  }
  closedir(d);
  return nodes;
}

void ClearMarks(const std::string& run_dir) {
  for (const std::string& node : Marks(run_dir)) unlink((run_dir + "/" + mpi::kSignalledPrefix + node).c_str());
}

}  // namespace

bool Relauncher::Continues(int rc) const {
  if (!Asked()) return false;
  if (rc == 0) return true;
  auto j = ReadRecord(s_.run_dir + "/" + mpi::kRelaunchRecord);
  if (j.ok() && j.value().contains("failed")) return true;  // FallBack's
  if (!j.ok() || !j.value().contains("left_nodes") || j.value()["left_nodes"].empty()) return false;
  std::fprintf(stderr, "elastic-launch: the world ended with status %d after its ranks on %s got SIGTERM (the job "
               "holding the node ends); its record is whole: the world is started again without them\n",
               rc, j.value()["left_nodes"].dump().c_str());
  return true;
}

int Relauncher::AfterNodesTaken(int rc) const {
  if (rc == 0 || rc == kExitWorldLost) return rc;
  std::vector<std::string> gone = Marks(s_.run_dir);
  std::erase(gone, mpi::ThisNodeName());
  if (gone.empty()) return rc;
  std::fprintf(stderr, "elastic-launch: the world ended with status %d when its ranks on %s got SIGTERM (the job "
               "holding the node ends) before it could go on without them: exit %d, the job is restarted from its "
               "last checkpoint\n", rc, nlohmann::json(gone).dump().c_str(), kExitWorldLost);
  return kExitWorldLost;
}

void Relauncher::ClearSignalled() const { ClearMarks(s_.run_dir); }

bool Relauncher::StateUntaken() const {
  return !states_.empty() && access(states_.back().c_str(), F_OK) == 0;
}

bool Relauncher::FallBack(const std::string& why) {
  if (Asked()) return false;  // the world wrote a record of its own
  auto j = ReadRecord(record());
  if (!j.ok() || !j.value().contains("from_world") || j.value().contains("failed")) return false;
  nlohmann::json& r = j.value();
  const std::string state = r.value("state", std::string());
  auto ranks = mpi::RelaunchWorldRanks(r["from_world"]);
  if (state.empty() || access(state.c_str(), F_OK) != 0 || !ranks.ok()) return false;  // taken, or no world
  std::fprintf(stderr, "elastic-launch: relaunch over %s FAILED (%s); its state was not taken: the world before it "
               "is started again as it was, %lld ranks over %s\n", r["world"].dump().c_str(), why.c_str(),
               static_cast<long long>(ranks.value()), r["from_world"].dump().c_str());
  r["failed"] = "the world over " + r["world"].dump() + ": " + why;
  r["world"] = r["from_world"];
  r["ranks"] = ranks.value();
  r.erase("from_world");
  const std::string path = s_.run_dir + "/" + mpi::kRelaunchRecord;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << r.dump() << "\n";
    out.flush();
    if (!out) {
      std::fprintf(stderr, "elastic-launch: cannot write %s: %s\n", tmp.c_str(), std::strerror(errno));
      unlink(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "elastic-launch: cannot rename %s: %s\n", tmp.c_str(), std::strerror(errno));
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

Result<int> Relauncher::Next(mpi::stack::GroupLaunch* group) {
  const std::string taken = record();
  if (std::rename((s_.run_dir + "/" + mpi::kRelaunchRecord).c_str(), taken.c_str()) != 0) {
    return Status(ErrorKind::kInvalidArgument, "cannot take " + s_.run_dir + "/" + mpi::kRelaunchRecord + ": " +
                                                   std::strerror(errno));
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto j = ReadRecord(taken);
  if (!j.ok()) return j.status();
  // How long the old world took to end after its stop (MPI_Finalize, the DVM's bookkeeping).
  const double stopped_at = j.value().value("stopped_at", 0.0);
  const double ended_s =
      stopped_at > 0 ? std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() - stopped_at
                     : 0.0;
  // The same state again after FallBack(): kept once.
  if (j.value().contains("state") && j.value()["state"].is_string() &&
      (states_.empty() || states_.back() != j.value()["state"].get<std::string>())) {
    states_.push_back(j.value()["state"]);
  }
  auto nodes = mpi::ParseRelaunchWorld(j.value().value("world", nlohmann::json()));
  if (!nodes.ok()) return nodes.status();
  int here = 0;
  int total = 0;
  std::string hosts;
  std::string others_hosts;
  for (const mpi::RelaunchNode& n : nodes.value()) {
    total += n.ranks;
    // This node first: the DVM maps rank 0 there, where the old rank 0 left the state.
    if (n.agent.empty()) here = n.ranks;
    else others_hosts += "," + n.node + ":" + std::to_string(n.ranks);
  }
  for (const mpi::RelaunchNode& n : nodes.value()) {
    if (n.agent.empty()) hosts = n.node + ":" + std::to_string(n.ranks) + others_hosts;
  }
  const bool others = nodes.value().size() > 1;
  if (others && !mpi::stack::RelaunchesAcrossNodes()) {
    return Status(ErrorKind::kInvalidArgument, std::string("this runtime (rendezvous ") + mpi::stack::RendezvousKind() +
                                                   ") relaunches a world on the launcher's node only");
  }
  const bool restarted = others || spans_others_;
  if (restarted) {
    // A new rendezvous over exactly the new world's nodes: the old one's daemons leave with it.
    const std::string agent = s_.self + " " + kAgentOption + " " + taken;
    if (agent.find_first_of("\t\n") != std::string::npos || s_.self.find(' ') != std::string::npos ||
        taken.find(' ') != std::string::npos) {
      return Status(ErrorKind::kInvalidArgument, "the launcher's path and the run directory must not hold blanks "
                                                 "for a relaunch over several nodes: " + agent);
    }
    // The whole world was this launch, and it has ended: nothing else to wait for (the DVM's
    // children now are its daemons' agents on the other nodes, which end with it).
    hooks_.stop_server(*server_, *server_cmd_);
    *server_ = -1;
    unlink(s_.uri_file.c_str());
    *server_cmd_ = others ? mpi::stack::RelaunchServerCommand(s_.server_program, s_.uri_file, s_.itf, hosts, agent)
                          : mpi::stack::ServerCommand(s_.server_program, s_.uri_file, s_.itf);
    *server_ = hooks_.start_server(*server_cmd_);
    spans_others_ = others;  // also when it does not start: what is left of it is stopped next time
    if (*server_ < 0 || !hooks_.wait_for_file(s_.uri_file, s_.wait_s)) {
      return Status(ErrorKind::kUnavailable, "the rendezvous over " + hosts + " did not start (no URI in " +
                                                 s_.uri_file + ")");
    }
  }
  group->ranks = total;
  group->hosts = others ? hosts : "";
  std::fprintf(stderr, "elastic-launch: relaunch: %d ranks over %s; the old world ended %.3f s after its stop, "
               "the rendezvous %s in %.3f s\n", total, hosts.c_str(), ended_s,
               restarted ? "restarted" : "kept", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return here;
}

void Relauncher::Abandon() {
  // A record no world will act on (the job is ending): its state is the job's newest.
  const std::string path = s_.run_dir + "/" + mpi::kRelaunchRecord;
  auto j = ReadRecord(path);
  if (j.ok() && j.value().contains("state") && j.value()["state"].is_string()) states_.push_back(j.value()["state"]);
  unlink(path.c_str());
}

bool Relauncher::Finish(const std::string& checkpoint_path) {
  // Taken ones are gone already (the new world's rank 0 removes what it read).
  for (std::size_t i = 0; i + 1 < states_.size(); ++i) unlink(states_[i].c_str());
  if (states_.empty() || access(states_.back().c_str(), F_OK) != 0) return false;
  return KeepAsCheckpoint(states_.back(), checkpoint_path);
}

bool KeepAsCheckpoint(const std::string& state, const std::string& checkpoint_path) {
  bool kept = false;
  if (!checkpoint_path.empty()) {
    const std::string dir = checkpoint_path.substr(0, checkpoint_path.rfind('/'));
    mkdir(dir.c_str(), 0700);
    const std::string tmp = checkpoint_path + ".tmp";
    {
      std::ifstream in(state, std::ios::binary);
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << in.rdbuf();
      out.flush();
      kept = in.good() && out.good();
    }
    kept = kept && std::rename(tmp.c_str(), checkpoint_path.c_str()) == 0;
    if (!kept) unlink(tmp.c_str());
  }
  std::fprintf(stderr, kept ? "elastic-launch: the relaunch did not complete: the state it carried is the job's "
                              "checkpoint %s now (a restart resumes from it)\n"
                            : "elastic-launch: the relaunch did not complete, and its state could not be kept as "
                              "the checkpoint %s\n", checkpoint_path.c_str());
  unlink(state.c_str());
  return kept;
}

void KeepLeftoverRecord(const std::string& run_dir, const std::string& checkpoint_path) {
  ClearMarks(run_dir);  // SIGTERM marks of its worlds (relaunch.h)
  const std::string path = run_dir + "/" + mpi::kRelaunchRecord;
  auto j = ReadRecord(path);
  unlink(path.c_str());
  if (!j.ok() || !j.value().contains("state") || !j.value()["state"].is_string()) return;
  const std::string state = j.value()["state"];
  if (access(state.c_str(), F_OK) == 0) KeepAsCheckpoint(state, checkpoint_path);
}

int AgentMain(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "elastic-launch: usage: elastic-launch %s RECORD NODE COMMAND... (the job's DVM runs this "
                 "itself to start its daemon on NODE)\n", kAgentOption);
    return kExitUsage;
  }
  auto j = ReadRecord(argv[2]);
  auto nodes = j.ok() ? mpi::ParseRelaunchWorld(j.value().value("world", nlohmann::json()))
                      : Result<std::vector<mpi::RelaunchNode>>(j.status());
  if (!nodes.ok()) {
    std::fprintf(stderr, "elastic-launch %s: %s\n", kAgentOption, nodes.status().message().c_str());
    return kExitUsage;
  }
  const std::string node = argv[3];
  std::string line;
  for (int i = 4; i < argc; ++i) line += (line.empty() ? "" : " ") + std::string(argv[i]);
  for (const mpi::RelaunchNode& n : nodes.value()) {
    if (n.node != node) continue;
    std::vector<std::string> cmd = n.agent;
    if (cmd.empty()) cmd = {"/bin/sh"};  // this node
    else cmd.push_back("/bin/sh");
    cmd.insert(cmd.end(), {"-c", line});
    std::vector<char*> args;
    for (std::string& a : cmd) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "elastic-launch %s: cannot run %s: %s\n", kAgentOption, args[0], std::strerror(errno));
    return 127;
  }
  std::fprintf(stderr, "elastic-launch %s: %s names no node %s\n", kAgentOption, argv[2], node.c_str());
  return kExitUsage;
}

}  // namespace elastic::launch
