// The MPI stack adapter (internal header): how the job's rendezvous is started and how processes
// that must reach it are launched, for the MPI the runtime is built against. CMake compiles
// exactly one implementation (elastic_mpi/CMakeLists.txt chooses by the MPI library's version):
//
//   mpi_stack_ompi_server.cpp  Open MPI 4.x: the job's `ompi-server` is the rendezvous; a group's
//                              ranks are an MPI singleton or a node-local mpirun given its URI.
//   mpi_stack_prte_dvm.cpp     Open MPI 5.x (PRRTE): the job's PRRTE DVM (`prte`) is the rendezvous;
//                              every group's ranks, and the accept's stand-in, are launched into it
//                              with `mpirun --dvm file:URI` (Open MPI 5 has no ompi-server, and
//                              separately launched mpiruns cannot connect/accept: docs/interfaces.md
//                              section 6, "The rendezvous on Open MPI 5").
//
// The rendezvous protocol itself (publish, lookup, connect/accept, join record) is the same on both
// (rendezvous.h); only who serves the names and who launches the processes differs.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace elastic::mpi::stack {

// "ompi-server" or "prte-dvm": the rendezvous this build uses (logs, --help, tests).
const char* RendezvousKind();

// The program that serves the job's rendezvous ("ompi-server" or "prte"), the default of
// elastic-launch's --rendezvous-server.
const char* DefaultServerProgram();

// The command that serves the job's rendezvous in the foreground and writes its URI to uri_file;
// itf: the network interface it listens on (ELASTIC_RENDEZVOUS_IF; empty: Open MPI's choice).
std::vector<std::string> ServerCommand(const std::string& program, const std::string& uri_file, const std::string& itf);

// Before the leader stops the server at the job's end: waits (up to max_s) until the server serves
// nobody else. Open MPI 5: stopping the DVM ends every process it launched and cuts the other
// groups' `mpirun --dvm` off (they exit 195, PMIx's lost connection, although their ranks ended
// well), so the leader waits until the DVM has no process of any group left, then a little for
// their mpiruns to hear of it. Open MPI 4: nothing to wait for.
void AwaitServerIdle(pid_t server, double max_s);

// After the server (or a group's command) ended: removes what ServerCommand (GroupCommand) made
// for it (Open MPI 5: the private session directory of the DVM, of the group's mpirun --dvm).
void RemoveLaunchFiles(const std::vector<std::string>& server_command);

// Where a joining group's ranks can start (the launcher reports it to elasticd: `launcher`
// message, "grows_onto"): "any_node" (Open MPI 4: every group is MPI singletons of its own node,
// joined through ompi-server) or "leader_node": only on the node of the job's node group 0, and
// only while the whole world is on that node (Open MPI 5: the node whose DVM the leader started;
// PRRTE 3.0.8 cannot add a node to a DVM, and a group launched into it does not join a world of
// two node groups, on either node: "opal_modex_recv: failed with return value=-46", then the
// connect times out or HAN crashes; docs/interfaces.md section 5), or "relaunch": the latter in
// place, and other nodes by a relaunch of the world over them (Open MPI 5 since the launcher
// relaunches, docs/runtime.md "Relaunch"). elasticd extends a job of the second kind only on that
// node, and a job of it on several nodes not at all; one of the third kind in place on that node
// while its extensions there joined in place, else by relaunch (relaunch_world.h).
const char* GrowsOnto();

// How many node groups (one per node of the job's step) the rendezvous can merge into the job's
// initial world (0: no limit), and why there is a limit. Open MPI 5.0 with PRRTE 3: 2. The connect
// of a second job of the DVM with processes on a node other than the DVM's own hung (three nodes)
// or ended the DVM's daemons (four) on PRRTE 3.0.8, every time (docs/interfaces.md section 5), so
// Session::Create refuses more node groups at once (kInvalidArgument) instead of hanging in the
// merge. Programs that do not merge through the runtime (an unmodified torchrun script: its world
// comes from the launcher's records) are not limited by this.
int MaxNodeGroups();
const char* NodeGroupLimitReason();

// One node group's ranks.
struct GroupLaunch {
  std::string mpirun;                 // mpirun to use (--mpirun)
  int ranks = 1;
  bool oversubscribe = false;
  std::string uri_file;               // the job's rendezvous URI file
  std::vector<std::string> rank_shim; // elastic-launch --rank-shim OFFSET [PID_DIR] -- (torch_env.h)
  std::vector<std::string> program;
  // A relaunched world over several nodes (relaunch.h): "NODE:RANKS,..." (ranks: all of them);
  // empty: `ranks` on this node.
  std::string hosts;
  // Words in front of each rank (before rank_shim) where the ranks are not the launcher's
  // children (RanksOutsideLauncher): the command that runs a process inside the launcher's own
  // batch-system job, whose devices the ranks use, when the rendezvous's daemon that starts them
  // runs in another job (elastic-launch --rank-agent). Empty: none. Ignored where the ranks are
  // the launcher's children (they run in its job already).
  std::vector<std::string> rank_agent;
};

// The argv that starts the group's ranks; *env receives what the ranks' environment adds
// (appended). The command runs in the launcher's own environment plus *env.
std::vector<std::string> GroupCommand(const GroupLaunch& launch, std::vector<std::string>* env);

// Whether the job's initial world on several nodes is one launch of the rendezvous over all of
// them (launch/spanning_world.h: node group 0's launcher starts every rank with one `mpirun --dvm
// --host NODE:RANKS,...`, the other launchers hold their nodes) instead of one node group per node
// merged by connect/accept. Open MPI 5: its DVM spans the job's nodes already, and the connect of
// two of its jobs on different nodes crashed the DVM now and then (`free(): invalid pointer`
// after `PMIX_ERROR ... pmix_server_dyn.c:1048`, PRRTE 3.0.8) and hung with three; one job of the
// DVM over every node never meets that code. Open MPI 4: no (node-local launches, ompi-server).
bool LaunchesAcrossNodes();

// Whether a relaunched world may span other nodes (relaunch.h): Open MPI 5, whose DVM is started
// again over them; Open MPI 4's node-local launch relaunches on the launcher's node only.
bool RelaunchesAcrossNodes();
// The rendezvous over a relaunched world's hosts ("NODE:RANKS,...", this node among them): the
// daemons on the other nodes started through `agent` (one shell word list: AGENT NODE COMMAND).
std::vector<std::string> RelaunchServerCommand(const std::string& program, const std::string& uri_file,
                                               const std::string& itf, const std::string& hosts,
                                               const std::string& agent);
// Whether the group's ranks are not the launcher's children (PRRTE DVM: they are the DVM's),
// so that the launcher hands them its environment and signals them through the group directory
// (launch/group_dir.h) instead of its own process group: `mpirun --dvm` carries neither, and a
// SIGTERM to it aborts the DVM itself while the ranks run on.
bool RanksOutsideLauncher();

// The stand-in that releases an accept (accept_release.h): argv (program and its arguments) and
// env (the rank's own environment) are rewritten so that it reaches the job's rendezvous.
void StandInCommand(const std::string& uri_file, std::vector<std::string>* argv, std::vector<std::string>* env);

}  // namespace elastic::mpi::stack
