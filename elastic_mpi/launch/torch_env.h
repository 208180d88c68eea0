// torchrun's environment for the ranks elastic-launch starts (docs/interfaces.md section 2,
// "torchrun's variables"), so that a torch.distributed script that initialises from the
// environment (`init_process_group(backend)`, env://) runs under the launcher unmodified, at the
// job's base size.
//
// The numbers describe the job's world at start: node groups 0..N-1 (one launcher per node), each
// with its own rank count; a rank's global rank is the ranks of the node groups before its own
// plus its local rank, the order of the runtime's merged MPI world. The launchers learn each
// other's rank counts, and the leader's MASTER_ADDR and MASTER_PORT, through one small record per
// node group in the job's run dir, tied to this launch by the rendezvous URI they share. A group
// that joins a running world (--join) is not part of that world: it gets only the local values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::launch {

// The names of torchrun's contract that the launcher sets (torch.distributed's env:// reads
// RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; scripts read the others).
inline constexpr char kRank[] = "RANK";
inline constexpr char kLocalRank[] = "LOCAL_RANK";
inline constexpr char kWorldSize[] = "WORLD_SIZE";
inline constexpr char kLocalWorldSize[] = "LOCAL_WORLD_SIZE";
inline constexpr char kGroupRank[] = "GROUP_RANK";
inline constexpr char kGroupWorldSize[] = "GROUP_WORLD_SIZE";
inline constexpr char kRoleName[] = "ROLE_NAME";
inline constexpr char kRoleRank[] = "ROLE_RANK";
inline constexpr char kRoleWorldSize[] = "ROLE_WORLD_SIZE";
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
inline constexpr char kMasterPort[] = "MASTER_PORT";
inline constexpr char kRestartCount[] = "TORCHELASTIC_RESTART_COUNT";
inline constexpr char kMaxRestarts[] = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr char kRunId[] = "TORCHELASTIC_RUN_ID";

// What one node group's launcher publishes for the others.
struct NodeRecord {
  std::string uri;          // the rendezvous URI of this launch (stale records do not match)
  int ranks = 0;            // ranks this node group starts
  std::string master_addr;  // node group 0 only
  int master_port = 0;      // node group 0 only
  std::string node;         // the node's name as the rendezvous knows it (mpi::ThisNodeName)
};

// The job's world at start, as torch.distributed numbers it, seen from one node group.
struct TorchWorld {
  int group_rank = 0;        // this node group
  int group_world_size = 1;  // node groups of the job
  int rank_offset = 0;       // ranks of the node groups before this one
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr;
  int master_port = 0;
};

std::string NodeRecordPath(const std::string& run_dir, int node_group);
std::string FormatNodeRecord(const NodeRecord& record);
Result<NodeRecord> ParseNodeRecord(std::string_view text);

// The world from every node group's record (records[g] of node group g; node group 0 names the
// master). kInvalidArgument when a record is inconsistent.
Result<TorchWorld> WorldFromRecords(const std::vector<NodeRecord>& records, int node_group);

// Node group 0's choice of MASTER_ADDR and MASTER_PORT, into `record`: the job script's own
// MASTER_ADDR/MASTER_PORT when set; else the IPv4 address of the rendezvous interface when the
// site names one (ELASTIC_RENDEZVOUS_IF), 127.0.0.1 for a job on one node, this host's name
// otherwise; and a TCP port free now on every interface (the kernel's choice for port 0).
Status ChooseMaster(const std::string& interface, bool one_node, NodeRecord* record);

// The node group's publication and the wait for everyone else's: writes this group's record,
// then reads the records of all `node_groups` until every one carries `uri` or `wait_s` passed.
// `all`, when given, receives every node group's record.
Result<TorchWorld> ExchangeRecords(const std::string& run_dir, const NodeRecord& mine, int node_group,
                                   int node_groups, double wait_s, std::vector<NodeRecord>* all = nullptr);

// Entries for the ranks' environment ("NAME=value"), the per-rank ones (RANK, LOCAL_RANK,
// ROLE_RANK) for `local_rank` when it is >= 0 (one rank; under mpirun the rank shim sets them).
// `world` null: a joining group, which gets only the local values and has the world's variables
// removed ("NAME" alone: unset), so that no stale value from the launcher's environment leaks in.
std::vector<std::string> TorchEnvironment(const TorchWorld* world, int local_world_size, const std::string& run_id,
                                          int local_rank);

// The hidden mode `elastic-launch --rank-shim OFFSET [GROUP_DIR] -- PROGRAM ARGS...` that the launcher puts
// in front of the program under a node-local mpirun: sets the per-rank variables from Open MPI's
// OMPI_COMM_WORLD_LOCAL_RANK (RANK = OFFSET + local rank; OFFSET "-" in a joining group: no RANK)
// and executes PROGRAM in place; with GROUP_DIR, first takes the launcher's environment from it and
// records its pid there (group_dir.h: ranks the launcher did not start itself). Returns only on
// error (an exit status).
// OFFSET may also be the first ranks of each node, "0,R0,R0+R1,..." (NodeStarts): one mpirun
// over all the job's nodes (spanning_world.h). Then RANK is OMPI_COMM_WORLD_RANK, and the node's
// GROUP_RANK and LOCAL_WORLD_SIZE follow from where that rank falls; a local rank that does not
// match (the runtime mapped the ranks otherwise than node by node) is an error.
int RankShimMain(int argc, char** argv);
inline constexpr char kRankShimOption[] = "--rank-shim";

// The shim's OFFSET for one mpirun over the nodes of `records` in their order: the first rank of
// each node, comma-separated ("0,4,6" for 4, 2 and 2 ranks).
std::string NodeStarts(const std::vector<NodeRecord>& records);

}  // namespace elastic::launch
