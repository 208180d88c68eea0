#include "elastic/common/env_vars.h"

#include <array>

namespace elastic::contract {
namespace {

using namespace party;

constexpr unsigned kProgram = kTrainingProgram;

// Readers "the training program" alone: nothing in the project reads the variable, but the user
// guide documents it to the job (section "Registration"), so it stays exported for the program.
constexpr std::array kTable{
    // name, set by, read by, plugin scrubs, per launch, meaning
    EnvVar{kSpecVersion, kPlugin, kProgram, true, true, "version of this variable set; 1"},
    EnvVar{kMode, kPlugin, kRuntime | kLauncher, true, true, "elastic or rigid (rigid: never rescale)"},
    EnvVar{kJobId, kPlugin, kRuntime | kLauncher, true, true, "Slurm job id of the elastic job (the parent's)"},
    EnvVar{kRole, kPlugin, kLauncher, true, true, "parent or extension"},
    EnvVar{kController, kPlugin, kRuntime | kLauncher, true, true, "elasticd's address HOST:PORT"},
    EnvVar{kGpusMin, kPlugin, kProgram, true, false, "lower bound of the GPU count (--elastic-gpus)"},
    EnvVar{kGpusMax, kPlugin, kProgram, true, false, "upper bound of the GPU count (--elastic-gpus)"},
    EnvVar{kGpuStep, kPlugin, kProgram, true, false, "GPU counts are multiples of this (--elastic-gpu-step)"},
    EnvVar{kBatchMin, kPlugin, kRuntime, true, false, "lower bound of the global batch (--elastic-batch)"},
    EnvVar{kBatchMax, kPlugin, kRuntime, true, false, "upper bound of the global batch (--elastic-batch)"},
    EnvVar{kLocalBatchMin, kPlugin, kProgram, true, false, "lower bound of the per-GPU batch (--elastic-local-batch)"},
    EnvVar{kLocalBatchMax, kPlugin, kProgram, true, false, "upper bound of the per-GPU batch (--elastic-local-batch)"},
    EnvVar{kLrScaling, kPlugin, kRuntime, true, false, "none, linear, sqrt or adascale (--elastic-lr-scaling)"},
    EnvVar{kModel, kPlugin, kProgram, true, false, "throughput profile name (--elastic-model)"},
    EnvVar{kFuseMaxPerGpu, kPlugin, kProgram, true, false, "most trials one GPU trains fused (--elastic-fuse)"},
    EnvVar{kFuseTrials, kPlugin, kProgram, true, true, "the leader's trials: array task indexes, comma-separated"},
    EnvVar{kFuseLeader, kPlugin, kProgram, true, true, "a member task: the job id of the leader that trains its trial"},
    EnvVar{kGpuTypes, kPlugin, kProgram, true, false, "GPU types the job accepts, a100,v100 (--elastic-gpu-types)"},
    EnvVar{kJoinToken, kPlugin | kLauncher, kRuntime | kLauncher, true, true,
           "32 hex digits: the job's initial token, or an extension group's one-time token"},
    EnvVar{kMungeSocket, kPlugin, kRuntime | kLauncher, true, false, "munged's socket for messages to elasticd"},
    EnvVar{kParentJobId, kPlugin, kProgram, true, true, "the parent's Slurm job id (extension jobs)"},
    EnvVar{kGroupId, kPlugin, kRuntime | kLauncher, true, true, "the extension's group id (0 = the base job)"},
    EnvVar{kRendezvousUri, kPlugin | kLauncher, kLauncher, true, true, "the parent's ompi-server URI (file)"},
    EnvVar{kNodeGroup, kLauncher | kUser, kRuntime | kLauncher, false, true, "index of this node group in the job"},
    EnvVar{kNodeGroups, kLauncher | kUser, kRuntime | kLauncher, false, false, "number of the job's initial node groups"},
    EnvVar{kSpannedNodes, kLauncher, kRuntime, false, true, "nodes of the initial world one launch started"},
    EnvVar{kLocalRank, kLauncher, kProgram, false, true, "rank within the node group"},
    EnvVar{kLocalSize, kLauncher, kProgram, false, true, "size of the node group"},
    EnvVar{kRunDir, kLauncher | kUser, kRuntime | kLauncher, false, true, "the job's private directory"},
    EnvVar{kJoin, kLauncher, kRuntime, true, true, "1: this group joins a running world"},
    EnvVar{kRelaunchFrom, kLauncher, kRuntime, true, true, "the relaunch record a world started again reads"},
    EnvVar{kStandalone, kUser, kRuntime | kLauncher, true, false, "1: no controller, no Slurm"},
};

}  // namespace

std::span<const EnvVar> EnvVars() noexcept { return kTable; }

const EnvVar* FindEnvVar(std::string_view name) noexcept {
  for (const EnvVar& v : kTable) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

bool NeverCarriedToExtensions(std::string_view name) noexcept {
  if (const EnvVar* v = FindEnvVar(name); v != nullptr && v->per_launch) return true;
  static constexpr std::array kPrefixes{std::string_view("SLURM_"), std::string_view("SLURMD_"),
                                        std::string_view("SRUN_"),  std::string_view("SBATCH_"),
                                        std::string_view("SALLOC_"), std::string_view("_SLURM_"),
                                        std::string_view("SPANK_"), std::string_view("PMI_")};
  for (std::string_view p : kPrefixes) {
    if (name.starts_with(p)) return true;
  }
  // The launchers' own, but the user's MCA tunables (OMPI_MCA_*, PMIX_MCA_*, PRTE_MCA_*).
  for (std::string_view p : {std::string_view("OMPI_"), std::string_view("PMIX_"), std::string_view("PRTE_")}) {
    if (name.starts_with(p) && !name.substr(p.size()).starts_with("MCA_")) return true;
  }
  return false;
}

bool CarriedToExtensionsByDefault(std::string_view name) noexcept {
  if (name.empty() || NeverCarriedToExtensions(name)) return false;
  static constexpr std::array kOwnToANode{
      std::string_view("CUDA_VISIBLE_DEVICES"), std::string_view("ROCR_VISIBLE_DEVICES"),
      std::string_view("HIP_VISIBLE_DEVICES"), std::string_view("GPU_DEVICE_ORDINAL"),
      std::string_view("ZE_AFFINITY_MASK"), std::string_view("TMPDIR"), std::string_view("HOME"),
      std::string_view("HOSTNAME"), std::string_view("PWD"), std::string_view("OLDPWD"),
      std::string_view("SHLVL"), std::string_view("_"), std::string_view("XDG_RUNTIME_DIR"),
      std::string_view("DBUS_SESSION_BUS_ADDRESS"), std::string_view("ENVIRONMENT")};
  for (std::string_view n : kOwnToANode) {
    if (name == n) return false;
  }
  return !name.starts_with("SSH_");
}

}  // namespace elastic::contract
