// Room for a waiting job's shape. A job that asks for G GPUs on each of N nodes (--nodes=N
// --gres=gpu:TYPE:G) starts only when N nodes each have G of its GPUs free; GPUs free in the
// right number but spread over other nodes do not help it. The plan counts GPUs per type, so
// extensions may block such a job while the plan finds room for it: the epoch (epoch.cpp) asks
// here which nodes the job can start on and which extensions must leave for that, releases those,
// and keeps the job's GPUs on the chosen nodes from its own growth meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace elastic::controller {

// What one node offers a waiting job: its GPUs of the job's type free now (or already given back
// for waiting jobs), and the extensions on it that could leave (id, GPUs), in the order they
// should go when several would do.
struct NodeRoom {
  std::string node;
  int free = 0;
  std::vector<std::pair<int64_t, int>> releasable;
};

// Room is made for this many waiting jobs at most per epoch, the first in the order Slurm starts
// them: a job further back would not start before them anyway, and the plan counts every waiting
// job's GPUs by number. (Each costs a pass over the nodes of its GPU type.)
constexpr std::size_t kRoomForFirst = 64;

struct RoomChoice {
  std::vector<std::string> nodes;  // the nodes the job would start on, in the order chosen
  std::vector<int64_t> release;    // the extensions that must leave for it (empty: it fits now)
  int released_gpus = 0;           // their GPUs
};

// The cheapest way to give `nodes` nodes `gpus_per_node` free GPUs each: per node, the fewest
// GPUs of extensions to release (ties: fewer extensions, then the earlier in its order; exact
// while a node has up to 12 releasable extensions, past that the largest first), then the
// nodes that cost least (ties: the node with fewer free GPUs first, so that large holes stay for
// others; then by name). nullopt when even every releasable extension gone would not do (other
// jobs hold the rest; nothing elasticd releases helps). Deterministic.
std::optional<RoomChoice> ChooseRoom(int nodes, int gpus_per_node, const std::vector<NodeRoom>& rooms);

}  // namespace elastic::controller
