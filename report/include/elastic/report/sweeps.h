// Fused sweeps (--elastic-fuse): the GPU-hours of a sweep's leader job, split over the array's
// tasks (its trials). docs/report.md, "Fused sweeps", is the rule for allocation managers:
//
//   a trial's GPU-hours = its task's own allocations in sacct (a task that Slurm started before
//   the leader registered runs a few seconds; a task held and ended by elasticd has none; the
//   leader's own task has none apart from the sweep's)
//   + the leader's GPU-hours (its allocation and its extension jobs) x the trial-steps the trial
//   consumed / the trial-steps of all the sweep's trials (equal shares when no steps were reported).
//
// The trials of a sweep therefore add up to sacct's GPU-hours of the array's tasks and the leader's
// extensions, exactly (up to rounding).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "elastic/report/journal.h"
#include "elastic/report/report.h"

namespace elastic::report {

// One entry per fused sweep of the journal whose leader `jobs` (BuildReport's, same period and
// clipping) has: trials the journal names and every other task of the array that sacct lists.
std::vector<SweepUsage> SplitSweeps(const std::vector<JobUsage>& jobs, const Journal& journal);

}  // namespace elastic::report
