// GPUs in Slurm's text forms, for the plugin and elasticd (no libslurm here: the callers pass the
// strings of their job and node records).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace elastic::slurm_text {

// "gpu:a100:4(S:0),gpu:2" (a node's Gres/GresUsed, a job's GRES in use) -> (type, count). The type
// is "mixed" when several types appear, "" when none is named.
std::pair<std::string, int> ParseGpuGres(const std::string& gres);
// The same per type, in order of first appearance: "gpu:a100:2(S:0),gpu:v100:2(S:1)" ->
// [(a100, 2), (v100, 2)]; untyped GPUs count under "". Empty when the node has no GPU.
std::vector<std::pair<std::string, int>> ParseGpuGresByType(const std::string& gres);
// "cpu=2,node=1,gres/gpu=4,gres/gpu:a100=4" (TRES) -> (type, count) from gres/gpu; the type is ""
// when untyped or mixed.
std::pair<std::string, int> ParseGpuTres(const std::string& tres);

// The GPU type a job's request names, from its tres_per_node, tres_per_job, tres_per_socket and
// tres_per_task strings ("gres:gpu:v100:2", "gres/gpu:v100=1"; items split at ',' or ';'): "" when
// none names a type (an untyped request: --gres=gpu:N, --gpus=N), "mixed" when they name several.
std::string RequestedGpuType(const std::vector<std::string>& tres_per);

// The GPUs a job asks for on each of its nodes, from its tres_per_node ("gres:gpu:v100:2",
// "gres/gpu:2", "gres/gpu:v100=2": --gres=gpu[:TYPE]:N or --gpus-per-node); 0 when its request is
// not per node (--gpus=N for the whole job, --gpus-per-task) or names no GPU.
int RequestedGpusPerNode(const std::string& tres_per_node);

// A running job's GPUs: its allocated TRES, else (right after a restart of slurmctld, before the
// TRES string is rebuilt) its GRES in use, else its per-node request ("gres:gpu:a100:2") times
// its nodes. The type is "" when untyped or mixed.
std::pair<std::string, int> RunningJobGpus(const std::string& tres_alloc, const std::string& gres_total,
                                           const std::string& tres_per_node, uint32_t nodes);

}  // namespace elastic::slurm_text
