// The optimizer's objective and keep-running rule as elastic-sim's options name them (--objective,
// --p, --pending-penalty, --keep-running), for both simulators (simulator.cpp on one GPU type, hetero_sim.cpp on
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

// Whether `policy` never preempts a running job: keep_running -1 (auto: every policy but pollux,
// whose artifact may take all GPUs of a job), 0 off, 1 on.
bool KeepsRunningJobs(int keep_running, const std::string& policy);

}  // namespace elastic::simulator::internal
