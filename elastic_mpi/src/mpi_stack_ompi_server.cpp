// The MPI stack adapter for Open MPI 4.x (mpi_stack.h): the job's ompi-server is the rendezvous.
// A group of one rank is an MPI singleton, a direct child of the launcher (Open MPI 4.1.4 ranks
// under orted crash at connect/accept); several ranks are a node-local mpirun that never asks
// Slurm for daemons. Both reach ompi-server through its URI file.
#include "mpi_stack.h"

#include "elastic/common/env_vars.h"
#include "session_dir.h"

namespace elastic::mpi::stack {
namespace {

constexpr const char* kSessionPrefix = "elastic-ompi";

// An Open MPI 4 process's session directory of its own (session_dir.h), as the first options of
// its command `cmd` (the program alone so far), where RemoveLaunchFiles looks for it.
void OwnSessionDir(std::vector<std::string>* cmd) {
  const std::string dir = NewSessionDir(kSessionPrefix);
  if (!dir.empty()) cmd->insert(cmd->end(), {"--mca", "orte_tmpdir_base", dir});
}

}  // namespace

const char* RendezvousKind() { return "ompi-server"; }

const char* DefaultServerProgram() { return "ompi-server"; }

std::vector<std::string> ServerCommand(const std::string& program, const std::string& uri_file,
                                       const std::string& itf) {
  // Its own session directory: two jobs of a user starting at once made one ompi-server fail
  // ("mkdir /tmp/ompi.HOST.UID: File exists"). RemoveLaunchFiles deletes it.
  std::vector<std::string> cmd = {program};
  OwnSessionDir(&cmd);
  cmd.insert(cmd.end(), {"--no-daemonize", "--report-uri", uri_file});
  if (!itf.empty()) cmd.insert(cmd.end(), {"--mca", "oob_tcp_if_include", itf});
  return cmd;
}

std::vector<std::string> GroupCommand(const GroupLaunch& launch, std::vector<std::string>* env) {
  env->push_back("OMPI_MCA_pmix_server_uri=file:" + launch.uri_file);
  if (launch.ranks == 1) {
    env->push_back(std::string(contract::kLocalRank) + "=0");
    return launch.program;  // an MPI singleton, a direct child
  }
  std::vector<std::string> cmd = {launch.mpirun};
  OwnSessionDir(&cmd);  // as the server's, for the same race between a user's jobs
  cmd.insert(cmd.end(), {"-np", std::to_string(launch.ranks), "--mca", "ras", "^slurm", "--mca", "plm", "^slurm",
                         "--ompi-server", "file:" + launch.uri_file});
  if (launch.oversubscribe) cmd.push_back("--oversubscribe");
  cmd.insert(cmd.end(), launch.rank_shim.begin(), launch.rank_shim.end());
  cmd.insert(cmd.end(), launch.program.begin(), launch.program.end());
  return cmd;
}

bool RanksOutsideLauncher() { return false; }

bool RelaunchesAcrossNodes() { return false; }

bool LaunchesAcrossNodes() { return false; }

std::vector<std::string> RelaunchServerCommand(const std::string& program, const std::string& uri_file,
                                               const std::string& itf, const std::string& /*hosts*/,
                                               const std::string& /*agent*/) {
  return ServerCommand(program, uri_file, itf);  // never asked for other nodes (RelaunchesAcrossNodes)
}

const char* GrowsOnto() { return "any_node"; }

int MaxNodeGroups() { return 0; }

const char* NodeGroupLimitReason() { return ""; }

void AwaitServerIdle(pid_t /*server*/, double /*max_s*/) {}

void RemoveLaunchFiles(const std::vector<std::string>& command) {
  // Only where OwnSessionDir put it, and only a directory it made (never one the program was given).
  if (command.size() < 4 || command[1] != "--mca" || command[2] != "orte_tmpdir_base") return;
  const std::string& dir = command[3];
  const std::string base = dir.substr(dir.rfind('/') + 1);
  if (base.rfind(std::string(kSessionPrefix) + ".", 0) == 0) RemoveSessionDir(dir);
}

void StandInCommand(const std::string& uri_file, std::vector<std::string>* /*argv*/, std::vector<std::string>* env) {
  // A singleton of its own that reaches the job's ompi-server.
  env->push_back("OMPI_MCA_pmix_server_uri=file:" + uri_file);
}

}  // namespace elastic::mpi::stack
