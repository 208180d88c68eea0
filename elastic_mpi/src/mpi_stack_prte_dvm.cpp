// The MPI stack adapter for Open MPI 5.x (mpi_stack.h): the job's PRRTE DVM is the rendezvous.
// Open MPI 5 has no ompi-server, and two separately started mpiruns hang for ever in
// connect/accept; processes launched by one DVM publish, look up, connect/accept and merge
// (docs/interfaces.md section 6, "The rendezvous on Open MPI 5"). So the leader's launcher starts
// `prte` in the foreground, its URI file is the job's rendezvous URI, and every group's ranks (the
// base job's node groups and every joining group), and the accept's stand-in, are launched into it
// with `mpirun --dvm file:URI`, which carries the launcher's environment to the ranks.
#include "mpi_stack.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string_view>
#include <thread>

#include "relaunch.h"
#include "session_dir.h"

namespace elastic::mpi::stack {

namespace {

bool Set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string_view(v) != "0";
}

// The DVM's placement: every group is one job of the DVM on this node, so the DVM's own slot count
// (the node's cores) is not the job's; ranks yield and are not bound when the node is oversubscribed.
void Placement(bool oversubscribe, std::vector<std::string>* cmd) {
  cmd->insert(cmd->end(), {"--map-by", ":OVERSUBSCRIBE"});
  if (oversubscribe) cmd->insert(cmd->end(), {"--bind-to", "none"});
}

// Whether the network interface of that name is a loopback interface.
bool IsLoopback(const std::string& itf) {
  struct ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return false;
  bool loopback = false;
  for (const struct ifaddrs* a = all; a != nullptr; a = a->ifa_next) {
    if (a->ifa_name != nullptr && itf == a->ifa_name && (a->ifa_flags & IFF_LOOPBACK) != 0) loopback = true;
  }
  freeifaddrs(all);
  return loopback;
}

// A session directory of its own for a PRRTE process (the DVM, or an mpirun --dvm; session_dir.h):
// one left by a process that was killed (SIGKILL) made a later prte or mpirun with the same pid
// fail ("prte_session_dir failed"). RemoveLaunchFiles deletes it afterwards.
void OwnSessionDir(std::vector<std::string>* cmd) {
  const std::string dir = NewSessionDir("elastic-dvm");
  if (!dir.empty()) cmd->insert(cmd->end(), {"--tmpdir", dir});
}

}  // namespace

const char* RendezvousKind() { return "prte-dvm"; }

const char* DefaultServerProgram() { return "prte"; }

namespace {

// The DVM in the foreground, its URI to uri_file, a session directory of its own.
std::vector<std::string> DvmCommand(const std::string& program, const std::string& uri_file, const std::string& itf) {
  std::vector<std::string> cmd = {program, "--report-uri", uri_file};
  OwnSessionDir(&cmd);
  // The same consent to running as root that Open MPI's mpirun takes from its environment.
  if (Set("OMPI_ALLOW_RUN_AS_ROOT") && Set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")) cmd.push_back("--allow-run-as-root");
  // The site's interface for the rendezvous, unless it is the loopback: PRRTE 3 takes loopback
  // for a DVM on one node by itself, and drops it from its interfaces as soon as the job spans
  // several nodes, so that a DVM told to use only loopback there refuses to start ("no available
  // interfaces"); the ranks' own traffic keeps the interface the job names (OMPI_MCA_btl_*).
  if (!itf.empty() && !IsLoopback(itf)) cmd.insert(cmd.end(), {"--prtemca", "oob_tcp_if_include", itf});
  return cmd;
}

}  // namespace

std::vector<std::string> ServerCommand(const std::string& program, const std::string& uri_file,
                                       const std::string& itf) {
  std::vector<std::string> cmd = DvmCommand(program, uri_file, itf);
  // Inside a Slurm job the DVM reads the job's nodes from Slurm and starts its daemon on each of
  // the others with srun; the launchers' own step already holds the nodes' CPUs, so that srun
  // must overlap it (without --overlap it waits for CPUs that never come free).
  cmd.insert(cmd.end(), {"--prtemca", "plm_slurm_args", "--overlap"});
  return cmd;
}

std::vector<std::string> GroupCommand(const GroupLaunch& launch, std::vector<std::string>* env) {
  // Fault tolerance (ULFM) on, unless the site says otherwise: without it Open MPI 5's ob1 ends
  // the whole process ("An error occurred in Socket closed ... on a NULL communicator") when any
  // process it was ever connected to exits, even after MPI_Comm_disconnect, so a refused joiner
  // (bad token) or a joiner that dies took the running world down with it. With it the runtime
  // sees MPI_ERR_PROC_FAILED instead (docs/interfaces.md section 5).
  if (std::getenv("OMPI_MCA_mpi_ft_enable") == nullptr) env->push_back("OMPI_MCA_mpi_ft_enable=1");
  // On oversubscribed cores an idle rank gives its core away (mpi_yield_when_idle, set by the
  // launcher) by sleeping, not by sched_yield(): ranks spinning on sched_yield() while they waited
  // for the others got 84% of a core each at nice 19 and starved every other task for minutes,
  // the kernel's own threads included (seen in CI on 2 cores: "workqueue lockup ... stuck for
  // 145s", "rcu_preempt kthread starved", slurmctld silent 3 minutes; docs/runtime.md
  // "Oversubscribed cores"). Open MPI 5 has the choice; the site's own setting wins.
  if (launch.oversubscribe && std::getenv("OMPI_MCA_threads_pthreads_yield_strategy") == nullptr) {
    env->push_back("OMPI_MCA_threads_pthreads_yield_strategy=nanosleep");
  }
  // On this node: a DVM launches only on nodes it owns, and a group on a node that is not the
  // DVM's fails to start ("All nodes which are allocated for this job are already filled", exit
  // 77) instead of running elsewhere (docs/interfaces.md section 5).
  std::vector<std::string> cmd = {launch.mpirun, "--dvm", "file:" + launch.uri_file, "-n",
                                  std::to_string(launch.ranks), "--host",
                                  launch.hosts.empty() ? ThisNodeName() + ":" + std::to_string(launch.ranks) : launch.hosts};
  OwnSessionDir(&cmd);
  Placement(launch.oversubscribe, &cmd);
  // The DVM's daemon on this node runs in the job that started the DVM (the base job's step): an
  // extension's ranks run inside the extension job through the agent, or they would live in the
  // base job's step (with Slurm's device cgroup, without the extension's GPUs).
  cmd.insert(cmd.end(), launch.rank_agent.begin(), launch.rank_agent.end());
  cmd.insert(cmd.end(), launch.rank_shim.begin(), launch.rank_shim.end());
  cmd.insert(cmd.end(), launch.program.begin(), launch.program.end());
  return cmd;
}

bool RanksOutsideLauncher() { return true; }

bool RelaunchesAcrossNodes() { return true; }

bool LaunchesAcrossNodes() { return true; }

std::vector<std::string> RelaunchServerCommand(const std::string& program, const std::string& uri_file,
                                               const std::string& itf, const std::string& hosts,
                                               const std::string& agent) {
  // Over exactly these hosts, its daemons started by PRRTE's ssh launcher through the agent (the
  // agent reaches a node through whatever holds it: elasticd's extension job), and not from the
  // batch system's allocation, which names the base job's nodes only.
  std::vector<std::string> cmd = DvmCommand(program, uri_file, itf);
  cmd.insert(cmd.end(), {"--host", hosts, "--prtemca", "plm", "ssh", "--prtemca", "plm_ssh_agent", agent,
                         "--prtemca", "ras", "^slurm"});
  return cmd;
}

const char* GrowsOnto() { return "relaunch"; }

int MaxNodeGroups() { return 2; }

const char* NodeGroupLimitReason() {
  return "on Open MPI 5.0 with PRRTE 3 the connect of a third node group hangs, or ends the DVM's daemons";
}

void AwaitServerIdle(pid_t server, double max_s) {
  // The DVM's processes on this node are its children (the ranks of every group launched here).
  const std::string children = "/proc/" + std::to_string(server) + "/task/" + std::to_string(server) + "/children";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(max_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(children);
    std::string any;
    if (!in || !(in >> any)) break;  // none left (or no such process)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // their mpiruns hear of the end
}

void RemoveLaunchFiles(const std::vector<std::string>& server_command) {
  for (std::size_t i = 0; i + 1 < server_command.size(); ++i) {
    if (server_command[i] == "--tmpdir") RemoveSessionDir(server_command[i + 1]);
  }
}

void StandInCommand(const std::string& uri_file, std::vector<std::string>* argv, std::vector<std::string>* /*env*/) {
  std::vector<std::string> cmd = {"mpirun", "--dvm", "file:" + uri_file, "-n", "1"};
  Placement(true, &cmd);
  cmd.insert(cmd.end(), argv->begin(), argv->end());
  *argv = std::move(cmd);
}

}  // namespace elastic::mpi::stack
