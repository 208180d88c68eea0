// State of the plugin within one process (sbatch, srun or slurmstepd): the site's settings,
// the job's elastic spec as the options built it, and what the batch step has to tell the
// user's task. One instance per process; SPANK calls are single-threaded.
#pragma once

#include <optional>
#include <string>

#include "site_config.h"
#include "spank_cxx.h"
#include "spec.h"

namespace elastic::spank {

struct PluginState {
  SiteConfig site;
  ElasticSpec spec;
  // First option error seen in slurmstepd: reported by the task, never by failing the step
  // (a failed step could drain the node).
  std::optional<std::string> option_error;
  // Set by the batch step for the job's task: a fatal error (the task fails before the user's
  // program runs) or a warning (printed once to the job's output).
  std::optional<std::string> task_error;
  std::optional<std::string> task_warning;
};

PluginState& State();

// Context modules.
int AllocatorPostOpt(spank_t sp);      // sbatch, salloc: validate before a job exists
int LocalPostOpt(spank_t sp);          // srun
void BatchStepPostOpt(spank_t sp);     // slurmstepd, batch step, as root: register and export
int TaskInit(spank_t sp);              // the batch step's task, as the user: report

}  // namespace elastic::spank
