// The plan's input: the registry and Slurm's view of nodes and jobs become the optimizer's
// snapshot (the capacity per GPU type that elastic work and waiting jobs may use, each elastic
// job's option table and bounds, waiting jobs as demand), plus what the epoch's later stages need
// to know about each job (frozen, about to finish, no step yet, its batch per GPU count).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config.h"
#include "elastic/optimizer/model.h"
#include "registry.h"
#include "slurm_adapter.h"

namespace elastic::controller {

struct PlanInput {
  optimizer::Snapshot snap;
  std::map<std::string, int> capacity;       // GPUs per type elastic work and pending jobs may use
  std::map<std::string, int> gpus_per_node;  // the largest node of each GPU type
  std::map<std::string, const NodeInfo*> node_by_name;
  // Jobs that grow on their leader's node only (ElasticJob::GrowsOnLeaderNodeOnly): that node.
  // Their largest size in the plan is what that node holds of the job's GPU type; those of them
  // on several nodes (`several_nodes`) are not grown at all.
  std::map<uint32_t, std::string> leader_node_only;
  std::set<uint32_t> several_nodes;
  // Jobs that grow by relaunch where growth in place cannot go (ElasticJob::GrowsByRelaunch) and
  // none of whose extensions joined in place: their leader's node (an extension elsewhere joins by
  // a relaunch). Those with an extension joined in place grow on the leader's node only, as
  // above; those on several nodes not at all.
  std::map<uint32_t, std::string> relaunch_leader;
  std::vector<uint32_t> elastic_order;        // the registry's running jobs, in snapshot order
  std::set<uint32_t> frozen_jobs;             // elastic jobs that may not change this epoch
  std::map<uint32_t, double> finishing;       // jobs not grown because they are about to finish: time left
  std::set<uint32_t> no_step;                 // jobs not grown because their program reported no step yet
  std::map<uint32_t, std::map<int, int64_t>> batch_at;  // each elastic job's batch per GPU count (its options)
  std::set<std::string> waiting_types;        // GPU types a pending job waits for ("" included: any type)
  // Waiting jobs whose GPU request is per node (JobInfo::gpus_per_node), in the order Slurm
  // starts them (highest priority first, then the oldest): the shape the epoch makes room for
  // (waiting_room.h). type "": any type.
  struct WaitingShape {
    uint32_t job = 0;
    std::string type;
    int nodes = 0;
    int gpus_per_node = 0;
    uint32_t priority = 0;
  };
  std::vector<WaitingShape> waiting_shapes;
  // Jobs that accept other GPU types: per type, whether a move there would pay back (MoveCheck
  // JSON); only types where it would are options of the plan.
  std::map<uint32_t, nlohmann::json> move_checks;

  int GpusPerNode(const std::string& type) const {
    auto it = gpus_per_node.find(type);
    return it != gpus_per_node.end() ? it->second : 1;
  }
};

// The batch of the job's options at n GPUs (its current batch where it has none).
inline int64_t BatchFor(const PlanInput& in, const ElasticJob& job, int n) {
  auto per_job = in.batch_at.find(job.id);
  if (per_job == in.batch_at.end()) return job.batch;
  auto it = per_job->second.find(n);
  return it != per_job->second.end() ? it->second : job.batch;
}

// `paused_all`: elasticctl pause_all is in force. `now` in Unix seconds. `move_cost_s`: what a move
// to another GPU type costs (Controller::MoveCostS). Caches each job's option
// table in the job (ElasticJob::options_cache). `nodes` must outlive the result (node_by_name).
PlanInput BuildPlanInput(const Registry& registry, const std::vector<NodeInfo>& nodes,
                         const std::vector<JobInfo>& sjobs, const ControllerConfig& config, bool paused_all,
                         double now, double move_cost_s);

}  // namespace elastic::controller
