// Allocator context (sbatch, salloc) and local context (srun): validate the options before a
// job exists. Nothing here talks to the controller.
#include <dlfcn.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <algorithm>
#include <string>
#include <vector>

#include "elastic/common/gres.h"
#include "elastic/slurm_api/slurm_api.h"
#include "plugin_state.h"

namespace elastic::spank {
namespace {

// Whether sbatch was given --array (on its command line, in #SBATCH lines or as SBATCH_ARRAY_INX).
// SPANK has no item for it in the allocator context, so this asks sbatch's own option table
// through slurm_option_get(), the call Slurm's cli_filter plugins use, on sbatch's options `opt`
// (both exported by sbatch and libslurmfull in Slurm 22.05 to 24.11). Nothing when either is
// missing: the batch step then checks the job itself (remote.cpp).
std::optional<bool> SbatchGaveArray() {
  using OptionGet = char* (*)(void*, const char*);
  auto get = reinterpret_cast<OptionGet>(dlsym(RTLD_DEFAULT, "slurm_option_get"));
  void* opt = dlsym(RTLD_DEFAULT, "opt");
  if (get == nullptr || opt == nullptr) return std::nullopt;
  // The value is Slurm's allocation (xmalloc); sbatch exits soon after, so it is left to it.
  const char* indexes = get(opt, "array");
  if (indexes == nullptr) return false;
  if (std::strcmp(indexes, "invalid-context") == 0) return std::nullopt;
  return indexes[0] != '\0';
}

// The cluster's GPU types for --elastic-gpu-types: the site's list (gpu_types= in
// plugstack.conf), else the types of the nodes' GRES as slurmctld reports them. Empty when
// neither is known (slurmctld does not answer): the names are then checked when the job starts.
std::vector<std::string> KnownGpuTypes(const SiteConfig& site) {
  if (!site.gpu_types.empty()) return site.gpu_types;
  std::vector<std::string> types;
  node_info_msg_t* msg = nullptr;
  if (slurm_load_node(0, &msg, SHOW_ALL) != SLURM_SUCCESS || msg == nullptr) {
    slurm_verbose("elastic: cannot read the node table to check --elastic-gpu-types: %s",
                  slurm_strerror(slurm_api::SlurmErrno()));
    return types;
  }
  for (uint32_t i = 0; i < msg->record_count; ++i) {
    const char* gres = msg->node_array[i].gres;
    for (const auto& [type, n] : slurm_text::ParseGpuGresByType(gres ? gres : "")) {
      if (!type.empty() && n > 0 && std::find(types.begin(), types.end(), type) == types.end()) types.push_back(type);
    }
  }
  slurm_free_node_info_msg(msg);
  std::sort(types.begin(), types.end());
  return types;
}

}  // namespace

int AllocatorPostOpt(spank_t sp) {
  PluginState& st = State();
  ElasticSpec& spec = st.spec;
  if (spec.extension) {
    slurm_error("elastic: --elastic-extension is set by elasticd on the jobs it submits; users cannot give it");
    return -1;
  }
  if (!spec.AnyElasticOption() && !spec.no_elastic) return 0;  // not an elastic job: nothing to do

  // salloc shares the allocator context with sbatch; only batch jobs can be elastic.
  if (std::strcmp(program_invocation_short_name, "sbatch") != 0 && spec.AnyElasticOption() && !spec.no_elastic) {
    slurm_error("elastic: elastic jobs are batch jobs: submit them with sbatch (%s cannot run them)",
                program_invocation_short_name);
    return -1;
  }
  const std::vector<std::string> known =
      spec.gpu_types && !spec.no_elastic ? KnownGpuTypes(st.site) : std::vector<std::string>{};
  Status s = Validate(spec, st.site, known);
  if (!s.ok()) {
    slurm_error("elastic: %s", s.message().c_str());
    return -1;
  }
  if (!spec.Elastic()) return 0;
  if (spec.fuse) {
    std::optional<bool> array = SbatchGaveArray();
    if (!array) {
      slurm_verbose("elastic: cannot see sbatch's --array here; the batch step checks that the job is an array");
    } else if (Status fused = CheckFusedArray(spec, *array); !fused.ok()) {
      slurm_error("elastic: %s", fused.message().c_str());
      return -1;
    }
  }
  if (!st.site.enabled) {
    slurm_spank_log("elastic: elastic scheduling is disabled on this cluster; the job will run rigid at %ld GPUs",
                    static_cast<long>(spec.gpus->min));
    return 0;
  }
  // For prolog/epilog scripts and the job's own information (SPANK_ELASTIC_SPEC there).
  // The batch step re-reads and re-validates the options themselves.
  std::string desc = Describe(spec);
  spank_err_t rc = spank_job_control_setenv(sp, "ELASTIC_SPEC", desc.c_str(), 1);
  if (rc != ESPANK_SUCCESS) slurm_verbose("elastic: cannot record the spec in the job: %s", spank_strerror(rc));
  return 0;
}

int LocalPostOpt(spank_t) {
  PluginState& st = State();
  if (st.spec.extension) {
    slurm_error("elastic: --elastic-extension is set by elasticd on the jobs it submits; users cannot give it");
    return -1;
  }
  if (!st.spec.AnyElasticOption() || st.spec.no_elastic) return 0;
  // Inside a job, srun inherits the job's options through the environment: that is fine, the
  // steps of an elastic job are ordinary steps. Outside a job, srun would create an
  // interactive allocation, which cannot be elastic.
  if (std::getenv("SLURM_JOB_ID") == nullptr) {
    slurm_error("elastic: elastic jobs are batch jobs: submit them with sbatch (srun cannot run them)");
    return -1;
  }
  return 0;
}

}  // namespace elastic::spank
