// Placement: turn each assignment's GPU count into GPUs on concrete nodes of its type.
#pragma once

#include "elastic/common/error.h"
#include "elastic/optimizer/model.h"

namespace elastic::optimizer {

// Fills every non-pending assignment's `placement`. Per type, the largest jobs go first; a
// job takes whole free nodes first (gpus / gpus_per_node of them), and its remainder goes to
// the node with the fewest free GPUs that still holds it (best fit), so few nodes are split
// and whole nodes stay free for large jobs. When no single node holds the remainder it is
// spread over the nodes with the most free GPUs. Fails with kInvalidArgument when the plan
// uses more GPUs of a type than the cluster has.
Status Place(const Cluster& cluster, Plan& plan);

}  // namespace elastic::optimizer
