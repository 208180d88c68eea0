// An extension job as Slurm shows it running, as the controller's tests put it in Slurm's view.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "slurm_adapter.h"

namespace elastic::controller {

inline JobInfo RunningExtensionJob(uint32_t id, uid_t owner, const std::string& node, const std::string& type,
                                   int gpus) {
  JobInfo ext;
  ext.id = id;
  ext.user_id = owner;
  ext.state = SlurmJobState::kRunning;
  ext.gpus = gpus;
  ext.gpu_type = type;
  ext.nodes = node;
  ext.node_names = {node};
  return ext;
}

}  // namespace elastic::controller
