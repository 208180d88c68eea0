// A job Slurm keeps pending for resources, as the controller's tests put it in Slurm's view.
#pragma once

#include <cstdint>
#include <string>

#include "slurm_adapter.h"

namespace elastic::controller {

// `gpus` GPUs of `type`; asked per node (`gpus_per_node` on each of `nodes` nodes) or, when
// gpus_per_node is 0, for the job as a whole (--gpus=N).
inline JobInfo WaitingJob(uint32_t id, int gpus, const std::string& type, int gpus_per_node = 0, int nodes = 0) {
  JobInfo waiting;
  waiting.id = id;
  waiting.state = SlurmJobState::kPending;
  waiting.waits_for_resources = true;
  waiting.gpus = gpus;
  waiting.gpu_type = type;
  waiting.gpus_per_node = gpus_per_node;
  waiting.nodes_min = nodes;
  return waiting;
}

}  // namespace elastic::controller
