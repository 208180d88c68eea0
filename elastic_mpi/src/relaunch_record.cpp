// The relaunch record's world (relaunch.h).
#include "relaunch.h"

#include <unistd.h>

#include <algorithm>
#include <set>

namespace elastic::mpi {

Result<std::vector<RelaunchNode>> ParseRelaunchWorld(const nlohmann::json& world) {
  auto bad = [](const std::string& why) {
    return Status(ErrorKind::kProtocol, "relaunch: the world " + why +
                                            " (expected [{\"node\": NAME, \"ranks\": N, \"agent\": [ARGV...]}, ...])");
  };
  if (!world.is_array() || world.empty()) return bad("is not a list of nodes");
  std::vector<RelaunchNode> nodes;
  std::set<std::string> seen;
  for (const auto& e : world) {
    if (!e.is_object() || !e.contains("node") || !e["node"].is_string() || e["node"].get<std::string>().empty()) {
      return bad("has an entry without a node name");
    }
    RelaunchNode n;
    n.node = e["node"].get<std::string>();
    if (n.node.find_first_of(" ,:\t\n") != std::string::npos) return bad("names node '" + n.node + "'");
    if (!seen.insert(n.node).second) return bad("names node " + n.node + " twice");
    if (!e.contains("ranks") || !e["ranks"].is_number_integer() || e["ranks"].get<std::int64_t>() < 1 ||
        e["ranks"].get<std::int64_t>() > 4096) {
      return bad("gives node " + n.node + " no rank count in 1-4096");
    }
    n.ranks = e["ranks"].get<int>();
    if (e.contains("agent")) {
      if (!e["agent"].is_array()) return bad("gives node " + n.node + " an agent that is not a list");
      for (const auto& a : e["agent"]) {
        if (!a.is_string() || a.get<std::string>().empty()) return bad("gives node " + n.node + " an empty agent word");
        n.agent.push_back(a.get<std::string>());
      }
    }
    nodes.push_back(std::move(n));
  }
  const auto here = std::count_if(nodes.begin(), nodes.end(), [](const RelaunchNode& n) { return n.agent.empty(); });
  if (here != 1) {
    return bad("names " + std::to_string(here) + " nodes without an agent: exactly one, the launcher's own node");
  }
  return nodes;
}

Result<std::int64_t> RelaunchWorldRanks(const nlohmann::json& world) {
  auto nodes = ParseRelaunchWorld(world);
  if (!nodes.ok()) return nodes.status();
  std::int64_t ranks = 0;
  for (const RelaunchNode& n : nodes.value()) ranks += n.ranks;
  return ranks;
}

std::string ThisNodeName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  std::string node = name;
  if (const auto dot = node.find('.'); dot != std::string::npos && dot > 0) node.resize(dot);
  return node;
}

}  // namespace elastic::mpi
