// Which jobs of a workload are trials of one fusable sweep (HFTA: K trials of the same model,
// one GPU each, trained fused on shared GPUs). Traces record jobs, not sweeps, so this is an
// assumption, stated as a rule (docs/simulator.md, "Fused sweeps"):
//   a job is a trial when it asked for one GPU and its submitter is known (JobSpec::user; the
//   Philly trace's virtual cluster); trials of the same submitter and the same model
//   (application: the Philly mapping gives one model per GPU-time class, so the same model means
//   the same duration class too) join the sweep opened by the first of them while they arrive
//   within `window_s` of that first one; the next one after the window opens a new sweep. A
//   sweep of one trial is no sweep: that job runs as any other.
#pragma once

#include <vector>

#include "elastic/simulator/workload.h"

namespace elastic::simulator {

struct SweepRule {
  double window_s = 600.0;  // from the sweep's first trial [s]
};

// Per job (in the workload's order): the index of its sweep (0, 1, ..., in the order of the
// sweeps' first trials), or -1 when it is no trial of a sweep of two or more.
std::vector<int> GroupSweeps(const std::vector<JobSpec>& jobs, const SweepRule& rule);

}  // namespace elastic::simulator
