// The world of a relaunch command (relaunch_world.h).
#include "relaunch_world.h"

#include <algorithm>
#include <map>

#include "spec.h"

namespace elastic::controller {

namespace {

std::vector<std::string> StepAgent(const std::string& job, const std::string& node) {
  std::vector<std::string> agent{"env", "-u", "SLURM_JOB_ID", "-u", "SLURM_JOBID", "-u", "SLURM_STEP_ID", "-u",
                                 "SLURM_STEPID"};
  // The base job's elastic options reach srun as the plugin's option variables, and the plugin
  // refuses an srun of an elastic job ("elastic jobs are batch jobs"): the agent's srun starts a
  // process in the extension job, which has none of them.
  // Slurm keeps an option in a job's environment as SLURM_SPANK_ followed by its variable.
  for (const spank::OptionInfo& o : spank::Options()) {
    std::string var = std::string("_SLURM_SPANK_OPTION_elastic_") + o.name;
    std::replace(var.begin(), var.end(), '-', '_');
    agent.insert(agent.end(), {"-u", var, "-u", "SLURM_SPANK_" + var});
  }
  agent.insert(agent.end(), {"srun", "--jobid=" + job, "--overlap", "-N1", "-n1", "-w", node});
  return agent;
}

}  // namespace

std::vector<std::string> RelaunchAgent(uint32_t job, const std::string& node) {
  return StepAgent(std::to_string(job), node);
}

std::string RankAgentForScript() {
  std::vector<std::string> words = StepAgent("$SLURM_JOB_ID", "$SLURMD_NODENAME");
  words.insert(words.end(), {"--mpi=none", "--export=ALL"});
  std::string text;
  for (const std::string& w : words) text += (text.empty() ? "" : " ") + w;
  return text;
}

Result<nlohmann::json> RelaunchWorld(const std::string& leader_node, int leader_ranks,
                                     const std::vector<RelaunchMember>& members) {
  if (leader_node.empty() || leader_ranks < 1) {
    return Status(ErrorKind::kInvalidArgument,
                  "the job's launcher did not register its node and ranks (an elastic-launch older than this "
                  "elasticd): the job cannot grow by relaunch");
  }
  nlohmann::json world = nlohmann::json::array();
  world.push_back({{"node", leader_node}, {"ranks", leader_ranks}});
  std::map<std::string, std::size_t> at;  // node -> its entry
  for (const RelaunchMember& m : members) {
    if (m.node.empty() || m.gpus < 1 || m.slurm_job == 0) {
      return Status(ErrorKind::kInvalidArgument, "an extension of the relaunch has no node, GPUs or Slurm job");
    }
    if (m.node == leader_node) {
      world[0]["ranks"] = world[0]["ranks"].get<int>() + m.gpus;
      continue;
    }
    if (auto it = at.find(m.node); it != at.end()) {
      world[it->second]["ranks"] = world[it->second]["ranks"].get<int>() + m.gpus;
      continue;
    }
    at[m.node] = world.size();
    world.push_back({{"node", m.node}, {"ranks", m.gpus}, {"agent", RelaunchAgent(m.slurm_job, m.node)}});
  }
  return world;
}

}  // namespace elastic::controller
