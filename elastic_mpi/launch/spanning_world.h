// The job's initial world over several nodes as one launch (mpi_stack.h, LaunchesAcrossNodes:
// Open MPI 5). One elastic-launch runs on each node of the step, as everywhere; they exchange
// their node records (torch_env.h: each node's name and rank count) through the run dir. Then
// node group 0's launcher starts every rank with one `mpirun --dvm --host NODE:RANKS,...` into the
// job's DVM, which spans the step's nodes already: the ranks form one MPI world from the start
// (ELASTIC_NODE_GROUPS=1 for the runtime) and no connect/accept between node groups takes place.
// The other launchers start nothing: each holds its node's task of the step, forwards the
// signals it gets to the world's ranks on its node (the group directory, group_dir.h, which the
// ranks there record themselves in), and ends with the world's exit status, which node group 0's
// launcher writes into the run dir when the world has ended (the world-end record, tied to this
// launch by the rendezvous URI, so that one of an earlier run of the job is not taken).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "torch_env.h"

namespace elastic::launch {

// Whether every node group runs on a node of its own (different names): a world over several nodes
// is launched as one only then. Node groups that share a node (simulated on one machine) are
// merged as node groups (mpi_stack.h), as on a runtime that cannot launch across nodes.
bool OneGroupPerNode(const std::vector<NodeRecord>& records);

// The world's hosts for the DVM, node group 0's node first, in node group order: "n1:4,n2:2".
std::string SpanningHosts(const std::vector<NodeRecord>& records);

// The group directory of the spanning world (every launcher of the job finds it by this name).
std::string SpanningGroupDir(const std::string& run_dir);

// Node group 0's launcher: the world ended with status rc (a private file; false when it cannot
// be written).
bool WriteWorldEnd(const std::string& run_dir, const std::string& uri, int rc);
// The status in the world-end record of this launch (uri), if there is one.
std::optional<int> ReadWorldEnd(const std::string& run_dir, const std::string& uri);

// The other launchers: waits until node group 0's launcher writes the world's end, calling
// `each_poll` (signal forwarding) every 50 ms; returns the world's status. Node group 0's
// launcher writes it on every way out once the world is one launch (also when it could not start
// it); the ranks on this node may end long before (rank 0 saving the model), so their end says
// nothing. Should that launcher die by a signal, srun ends the whole step.
int AwaitWorldEnd(const std::string& run_dir, const std::string& uri, const std::function<void()>& each_poll);

}  // namespace elastic::launch
