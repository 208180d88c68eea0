// Room for waiting jobs whose request is per node (waiting_room.h chooses; this enacts it):
// Controller::MakeRoom, run by the epoch (epoch.cpp) before the plan.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "controller.h"
#include "elastic/common/log.h"
#include "free_gpus.h"
#include "waiting_room.h"

namespace elastic::controller {
namespace {

constexpr const char* kComponent = "controller";

}  // namespace

nlohmann::json Controller::MakeRoom(const PlanInput& in, FreeGpus& free, bool dry_run, double now,
                                    std::map<uint32_t, nlohmann::json>& shrunk) {
  nlohmann::json out = nlohmann::json::array();
  if (in.waiting_shapes.empty()) return out;
  // What a waiting job may count on, per type and node: GPUs free now (held ones included: they
  // were released for waiting jobs) and those of extensions leaving; less what earlier waiting
  // jobs were given.
  std::map<std::string, std::map<std::string, int>> avail;
  for (const auto& [type, per_node] : free.unheld) {
    for (const auto& [node, f] : per_node) avail[type][node] = f;
  }
  for (const auto& [eid, e] : registry_.extensions) {
    auto per_type = avail.find(e.gpu_type);
    if (e.state != ExtState::kLeaving || per_type == avail.end()) continue;
    if (auto it = per_type->second.find(e.node); it != per_type->second.end()) it->second += e.gpus;
  }
  // Extensions that may leave now, per type and node, the latest joined first (as a shrink takes
  // them): joined, of jobs free to rescale (not frozen, not moving).
  std::map<std::string, std::unordered_map<std::string, std::vector<const Extension*>>> may_leave;
  {
    std::vector<const Extension*> all;
    for (const auto& [eid, e] : registry_.extensions) {
      if (e.state != ExtState::kJoined || !registry_.jobs.count(e.parent)) continue;
      if (in.frozen_jobs.count(e.parent) || moves_.count(e.parent)) continue;
      all.push_back(&e);
    }
    std::sort(all.begin(), all.end(), [](const Extension* a, const Extension* b) {
      return std::tie(b->joined_at, b->id) < std::tie(a->joined_at, a->id);
    });
    for (const Extension* e : all) may_leave[e->gpu_type][e->node].push_back(e);
  }
  std::set<int64_t> released;  // this epoch, for an earlier waiting job
  for (std::size_t k = 0; k < in.waiting_shapes.size() && k < kRoomForFirst; ++k) {
    const PlanInput::WaitingShape& shape = in.waiting_shapes[k];
    std::vector<std::string> types;  // the GPU types it may use
    if (auto m = moves_.find(shape.job); m != moves_.end()) {
      types.push_back(m->second.to);  // requeued for a move: Slurm starts it on that type only
    } else if (shape.type.empty()) {
      for (const auto& [type, per_node] : free.free) types.push_back(type);
    } else {
      types.push_back(shape.type);
    }
    // What each node offers it; a node with several of its types counts them together.
    std::vector<NodeRoom> list;
    std::unordered_map<std::string, std::size_t> at;
    for (const auto& t : types) {
      const auto& leave_t = may_leave[t];
      for (const auto& [node, a] : avail[t]) {
        auto [it, fresh] = at.try_emplace(node, list.size());
        if (fresh) list.push_back({node, 0, {}});
        NodeRoom& r = list[it->second];
        r.free += a;
        if (auto lit = leave_t.find(node); lit != leave_t.end()) {
          for (const Extension* e : lit->second) {
            if (!released.count(e->id)) r.releasable.push_back({e->id, e->gpus});
          }
        }
      }
    }
    std::erase_if(list, [&](const NodeRoom& r) {  // nodes that could never hold it
      int could = r.free;
      for (const auto& [id, gpus] : r.releasable) could += gpus;
      return could < shape.gpus_per_node;
    });
    nlohmann::json entry{{"job", shape.job}, {"nodes", shape.nodes}, {"gpus_per_node", shape.gpus_per_node}};
    if (!shape.type.empty()) entry["type"] = shape.type;
    const auto choice = ChooseRoom(shape.nodes, shape.gpus_per_node, list);
    if (!choice) {
      entry["action"] = "none";  // jobs elasticd does not shrink (or frozen ones) hold what it needs
      out.push_back(std::move(entry));
      continue;
    }
    nlohmann::json gone = nlohmann::json::array();
    for (int64_t eid : choice->release) {
      Extension& e = registry_.extensions.at(eid);
      ElasticJob& job = registry_.jobs.at(e.parent);
      released.insert(eid);
      avail[e.gpu_type][e.node] += e.gpus;
      gone.push_back({{"job", job.id}, {"group", e.group}, {"node", e.node}, {"gpus", e.gpus}});
      // The job's decision this epoch: a shrink (as Shrink writes it) for the waiting job(s).
      auto [dit, first] = shrunk.try_emplace(job.id, nlohmann::json{{"job", job.id}, {"action", "shrink"}});
      nlohmann::json& d = dit->second;
      if (first) {
        d["current"] = d["target"] = registry_.PlannedGpus(job);
        d["batch"] = job.batch;
        d["groups"] = nlohmann::json::array();
        d["room_for"] = nlohmann::json::array();
        if (config_.release_hold_s > 0) d["held_for_waiting_jobs_s"] = config_.release_hold_s;
      }
      d["target"] = d["target"].get<int>() - e.gpus;
      d["target_batch"] = BatchFor(in, job, d["target"].get<int>());
      d["groups"].push_back({{"group", e.group}, {"job", e.slurm_job}, {"gpus", e.gpus}, {"state", ExtStateName(e.state)},
                             {"node", e.node}});
      if (d["room_for"].empty() || d["room_for"].back() != shape.job) d["room_for"].push_back(shape.job);
      if (dry_run) continue;
      Log(LogLevel::kInfo, kComponent, "job ", shape.job, " waits for ",
          shape.nodes == 1 ? std::string("a node") : std::to_string(shape.nodes) + " nodes", " with ",
          shape.gpus_per_node, " GPUs free", shape.nodes == 1 ? "" : " on each", ": extension group ", e.group,
          " of job ", job.id, " on ", e.node, " (", e.gpus, " GPUs) leaves for it");
      LetGo(job, e, in, /*hold=*/true, now);
    }
    for (const auto& node : choice->nodes) {  // its GPUs there
      int need = shape.gpus_per_node;
      for (const auto& t : types) {
        int& a = avail[t][node];
        const int use = std::min(a, need);
        a -= use;
        need -= use;
      }
    }
    entry["action"] = gone.empty() ? "fits" : "release";
    entry["on"] = choice->nodes;
    if (!gone.empty()) entry["released"] = std::move(gone);
    out.push_back(std::move(entry));
  }
  // Growth this epoch leaves the waiting jobs what they were given: on each node it takes no more
  // than what is left to count on there.
  for (const auto& [type, per_node] : avail) {
    for (const auto& [node, a] : per_node) {
      auto it = free.free[type].find(node);
      if (it != free.free[type].end() && it->second > a) free.Take(type, node, it->second - std::max(0, a));
    }
  }
  return out;
}

}  // namespace elastic::controller
