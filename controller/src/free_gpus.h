// The GPUs growth may take in an epoch (epoch.cpp, room.cpp): Controller::FreeGpus.
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "controller.h"

namespace elastic::controller {

// Free GPUs per GPU type and usable node (a node with several types counts under each), and per
// type the nodes ordered by most free GPUs first (ties by name), kept in order as growth takes
// GPUs: choosing nodes costs O(log nodes).
struct Controller::FreeGpus {
  std::map<std::string, std::unordered_map<std::string, int>> free;  // type -> node -> free GPUs
  std::map<std::string, std::set<std::pair<int, std::string>>> by_free;  // type -> (-free, node)

  FreeGpus(const std::vector<NodeInfo>& nodes, const Registry& registry,
           const std::map<uint32_t, const JobInfo*>& by_id,
           const std::map<std::pair<std::string, std::string>, Hold>& holds) {
    for (const auto& n : nodes) {
      if (!n.usable || n.draining) continue;
      for (const auto& t : n.Types()) free[t.type][n.name] = n.FreeOf(t.type);
    }
    auto take = [&](const std::string& type, const std::string& node, int gpus) {
      auto per_type = free.find(type);
      if (per_type == free.end()) return;
      auto it = per_type->second.find(node);
      if (it != per_type->second.end()) it->second = std::max(0, it->second - gpus);
    };
    for (const auto& [id, e] : registry.extensions) {  // submitted but not yet running: their GPUs are spoken for
      auto it = by_id.find(e.slurm_job);
      if (it != by_id.end() && it->second->state == SlurmJobState::kPending) take(e.gpu_type, e.node, e.gpus);
    }
    unheld = free;
    for (const auto& [key, hold] : holds) take(hold.type, hold.node, hold.gpus);  // released for a waiting job
    for (const auto& [type, per_node] : free) {
      for (const auto& [name, f] : per_node) {
        if (f > 0) by_free[type].insert({-f, name});
      }
    }
  }

  // Kept from growth this epoch (a waiting job's room).
  void Take(const std::string& type, const std::string& node, int gpus) {
    auto per_type = free.find(type);
    if (gpus <= 0 || per_type == free.end()) return;
    auto it = per_type->second.find(node);
    if (it == per_type->second.end() || it->second <= 0) return;
    by_free[type].erase({-it->second, node});
    it->second = std::max(0, it->second - gpus);
    if (it->second > 0) by_free[type].insert({-it->second, node});
  }

  // Free GPUs before the holds for waiting jobs are taken off (a waiting job may use those).
  std::map<std::string, std::unordered_map<std::string, int>> unheld;
};

}  // namespace elastic::controller
