// The optimizer's objective as elastic-sim's options name it (--objective, --p,
// --pending-penalty), for both simulators (simulator.cpp on one GPU type, hetero_sim.cpp on
// several). Internal to simulator/.
#pragma once

#include <string>

#include "elastic/common/error.h"
#include "elastic/optimizer/policy.h"

namespace elastic::simulator::internal {

// kind: "" keeps the policy's own; p: the power mean's exponent; pending_penalty: 0 the
// objective's default (Sia's 1.1), > 0 that cost, < 0 Pollux's for `cluster`.
// kInvalidArgument for an unknown kind.
Status ApplyObjectiveOptions(const std::string& kind, double p, double pending_penalty,
                             const optimizer::Cluster& cluster, optimizer::Objective* objective);

}  // namespace elastic::simulator::internal
