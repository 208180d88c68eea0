// Fused sweeps (--elastic-fuse): a job array whose tasks are the trials of one sweep, trained as
// one elastic job. The first task of the array to register is the sweep's leader: it trains every
// trial of the array fused; elasticd holds the array's other pending tasks so that they take no
// GPUs, and ends each of them once the leader reports its trial done (trial_done). A task that
// Slurm started before the leader registered is a member: it is told the leader's id and ends at
// once. When the leader ends, tasks whose trial it did not finish are released and run on their
// own. docs/interfaces.md section 3 ("Fused sweeps") is the contract.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "slurm_adapter.h"

namespace elastic::controller {

// The task indexes of a job array's pending record as Slurm writes them: "1-7", "0,3,8-12:2",
// possibly with a throttle "%4" at the end. nullopt when the text is not of that form.
std::optional<std::vector<uint32_t>> ParseArrayTasks(std::string_view text);

// The trials of array `array_job`: the indexes of its tasks that have not ended (running or
// pending, split off or in the pending record), sorted, each once.
std::vector<uint32_t> SweepTrials(const std::vector<JobInfo>& jobs, uint32_t array_job);

}  // namespace elastic::controller
