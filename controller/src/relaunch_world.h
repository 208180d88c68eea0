// The world of a relaunch (docs/runtime.md, "Relaunch"; docs/interfaces.md section 3, `relaunch`):
// where a job's runtime reaches other nodes only by starting its world again (ElasticJob::
// GrowsByRelaunch: Open MPI 5's DVM), elasticd grows and shrinks it by a `relaunch` command whose
// world names every node the job's ranks are to run on:
//   * the leader's node (the launcher's own, as it registered it), no agent: the base job's ranks
//     there (the launcher's) and one per GPU of each relaunch extension on that node;
//   * each other node of a relaunch extension: one rank per GPU of the extensions there, and the
//     agent that starts a process inside the extension job that holds it (its launcher holds the
//     node and starts no ranks itself):
//       env -u SLURM_JOB_ID -u SLURM_JOBID -u SLURM_STEP_ID -u SLURM_STEPID
//           -u _SLURM_SPANK_OPTION_elastic_elastic_gpus
//           -u SLURM_SPANK__SLURM_SPANK_OPTION_elastic_elastic_gpus ... (every option of the plugin)
//           srun --jobid=<extension> --overlap -N1 -n1 -w <node>
//     (the agent runs in the base job's step environment, whose job and step ids srun must not
//     take, nor the base job's elastic options: the plugin refuses an srun of an elastic job).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "elastic/common/error.h"

namespace elastic::controller {

// The agent of `node`, held by extension job `job` (above).
std::vector<std::string> RelaunchAgent(uint32_t job, const std::string& node);

// The same agent for one rank of an extension that joins in place where the rendezvous's daemon
// runs in the base job (Open MPI 5's DVM; the launcher registered "rank_agent": true): written
// into the extension's batch script, where the shell puts in its job and node
// ($SLURM_JOB_ID, $SLURMD_NODENAME), for `elastic-launch --join --rank-agent`. The rank's srun
// has no MPI plugin (the rank's PMIx server is the DVM's daemon, whose variables --export=ALL
// carries). One shell word list of words without spaces or quotes.
std::string RankAgentForScript();

struct RelaunchMember {  // an extension in the world to be
  std::string node;
  int gpus = 0;
  uint32_t slurm_job = 0;
};

// The `world` of a relaunch command, the leader first, other nodes in the order given (several
// extensions on one node: one entry, ranks summed, started through the first one's job).
// kInvalidArgument when the leader's node or rank count is unknown (a launcher of an earlier
// version registered without them) or a member has no node, GPUs or job.
Result<nlohmann::json> RelaunchWorld(const std::string& leader_node, int leader_ranks,
                                     const std::vector<RelaunchMember>& members);

}  // namespace elastic::controller
