// The relaunch record (docs/runtime.md, "Relaunch"): where the runtime tells elastic-launch that
// the world ended for a relaunch, and over which nodes to start it again. At a rescale point with
// a `relaunch` command, rank 0 writes the registered state to a file (memory-backed where
// /dev/shm is) and then <run dir>/relaunch.json:
//   {"world": [{"node": "n1", "ranks": 2}, {"node": "n2", "ranks": 2, "agent": ["srun", ...]}],
//    "state": "/dev/shm/elastic-relaunch....", "meta": {step, batch, ...}}
// and every rank stops. The leader's launcher renames the record to relaunched.json, starts the
// world again over those nodes (mpi_stack.h) with ELASTIC_RELAUNCH_FROM naming it, and the new
// world's rank 0 reads the meta in Create() and the state in Begin() and hands both to every rank.
// A node's `agent` is the command that starts a process there (the launcher's own node has
// none); elasticd writes it, so that neither the runtime nor the launcher knows the scheduler.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "elastic/common/error.h"

namespace elastic::mpi {

inline constexpr char kRelaunchRecord[] = "relaunch.json";       // written by rank 0
inline constexpr char kRelaunchedRecord[] = "relaunched.json";   // the launcher's, once taken
// A relaunched world's rank that gets SIGTERM creates <run dir>/sigterm.<its node> (from the
// signal handler): the launcher learns from it which nodes were taken from the world when the
// world ends before its rank 0 could say so (docs/runtime.md, "A node taken away").
inline constexpr char kSignalledPrefix[] = "sigterm.";

struct RelaunchNode {
  std::string node;
  int ranks = 0;
  std::vector<std::string> agent;  // empty: this node (the launcher's)
};

// The nodes of a relaunch's world; kProtocol naming what is wrong (not an array, no node, a node
// twice, ranks outside 1-4096, an agent that is not a list of strings, not exactly one node
// without an agent: the launcher's own).
Result<std::vector<RelaunchNode>> ParseRelaunchWorld(const nlohmann::json& world);

// The world's ranks in all, or ParseRelaunchWorld's error.
Result<std::int64_t> RelaunchWorldRanks(const nlohmann::json& world);

// This node's name as a world names it and as the DVM does (PRRTE's default): the host name up
// to its first dot ("localhost" when there is none).
std::string ThisNodeName();

}  // namespace elastic::mpi
