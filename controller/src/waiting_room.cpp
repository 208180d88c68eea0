#include "waiting_room.h"

#include <algorithm>
#include <tuple>

namespace elastic::controller {
namespace {

// Exact search over the node's extensions while there are few (a node holds a handful); past that,
// the largest first until the deficit is covered.
constexpr std::size_t kExactUpTo = 12;

struct NodeCost {
  const NodeRoom* room = nullptr;
  int gpus = 0;                  // GPUs released
  std::vector<int64_t> release;  // which
};

// The extensions of `room` to release so that `need` GPUs are free there; nullopt when all of
// them would not do.
std::optional<NodeCost> CostOf(const NodeRoom& room, int need) {
  NodeCost c{&room, 0, {}};
  const int deficit = need - room.free;
  if (deficit <= 0) return c;
  const auto& ext = room.releasable;
  int all = 0;
  for (const auto& [id, gpus] : ext) all += gpus;
  if (all < deficit) return std::nullopt;
  if (ext.size() <= kExactUpTo) {
    // Subsets in increasing mask order: among those of the fewest GPUs and then the fewest
    // extensions, the first found favours the earliest in the node's order.
    std::tuple<int, int, uint32_t> best{all + 1, 0, 0};
    for (uint32_t mask = 1; mask < (1u << ext.size()); ++mask) {
      int gpus = 0;
      int count = 0;
      for (std::size_t i = 0; i < ext.size(); ++i) {
        if ((mask >> i) & 1u) {
          gpus += ext[i].second;
          ++count;
        }
      }
      if (gpus >= deficit && std::tie(gpus, count) < std::tie(std::get<0>(best), std::get<1>(best))) {
        best = {gpus, count, mask};
      }
    }
    for (std::size_t i = 0; i < ext.size(); ++i) {
      if ((std::get<2>(best) >> i) & 1u) c.release.push_back(ext[i].first);
    }
    c.gpus = std::get<0>(best);
    return c;
  }
  std::vector<std::size_t> order(ext.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ext[a].second > ext[b].second; });
  for (std::size_t i : order) {
    if (c.gpus >= deficit) break;
    c.release.push_back(ext[i].first);
    c.gpus += ext[i].second;
  }
  return c;
}

}  // namespace

std::optional<RoomChoice> ChooseRoom(int nodes, int gpus_per_node, const std::vector<NodeRoom>& rooms) {
  if (nodes <= 0 || gpus_per_node <= 0) return std::nullopt;
  std::vector<NodeCost> costs;
  for (const auto& r : rooms) {
    if (auto c = CostOf(r, gpus_per_node)) costs.push_back(std::move(*c));
  }
  if (costs.size() < static_cast<std::size_t>(nodes)) return std::nullopt;
  std::partial_sort(costs.begin(), costs.begin() + nodes, costs.end(), [](const NodeCost& a, const NodeCost& b) {
    return std::tie(a.gpus, a.room->free, a.room->node) < std::tie(b.gpus, b.room->free, b.room->node);
  });
  RoomChoice choice;
  for (int i = 0; i < nodes; ++i) {
    const NodeCost& c = costs[static_cast<std::size_t>(i)];
    choice.nodes.push_back(c.room->node);
    choice.release.insert(choice.release.end(), c.release.begin(), c.release.end());
    choice.released_gpus += c.gpus;
  }
  return choice;
}

}  // namespace elastic::controller
