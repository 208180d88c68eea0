// Recorded views of Slurm (nodes, jobs) plus elasticd's registry, as JSON: `elasticctl snapshot`
// records one from a running elasticd, `elasticd-bench` replays (or generates) them to measure
// the controller's stages without a cluster.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "elastic/common/error.h"
#include "db.h"
#include "slurm_adapter.h"

namespace elastic::controller {

nlohmann::json SnapshotToJson(const std::vector<NodeInfo>& nodes, const std::vector<JobInfo>& jobs,
                              const nlohmann::json& registry);

struct RecordedSnapshot {
  std::vector<NodeInfo> nodes;
  std::vector<JobInfo> jobs;
  nlohmann::json registry = nlohmann::json::array();  // ElasticJob records
};
// kInvalidArgument naming the first malformed entry.
Result<RecordedSnapshot> SnapshotFromJson(const nlohmann::json& j);

// Writes a recorded registry (ElasticJob records) into a state database as running jobs, so that
// a Controller opened on it starts with them (replays, benchmarks and tests without Slurm).
void SeedRegistry(Database& db, const nlohmann::json& registry);
// And an extension of a seeded job: its group, Slurm job, node, GPU type and count, state as
// stored ("joined", "leaving", ...), and when it was created and joined (Unix seconds).
void SeedExtension(Database& db, uint32_t parent, int group, uint32_t slurm_job, const std::string& node,
                   const std::string& gpu_type, int gpus, const std::string& state, double created_at,
                   double joined_at);

// A synthetic snapshot: `nodes` nodes of `gpus_per_node` GPUs over `types` GPU types, and
// `elastic_jobs` running elastic jobs (1-4 GPUs each, up to 4x their base) placed on them,
// plus `pending` waiting rigid jobs (each on one node, its GPUs asked per node); seeded,
// deterministic.
RecordedSnapshot GenerateSnapshot(int nodes, int gpus_per_node, int types, int elastic_jobs, int pending, uint64_t seed);

}  // namespace elastic::controller
