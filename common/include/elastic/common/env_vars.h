// The ELASTIC_* environment variables that cross a component boundary: the one definition of
// their names, of who sets each and of who reads it (docs/interfaces.md section 2 describes them
// for people). The SPANK plugin's list of variables to scrub, elastic-launch's list of variables
// an extension never inherits and the runtime's table of what it reads all come from here.
//
// The runtime's own tunables (ELASTIC_LOG_LEVEL, ELASTIC_CONNECT_TIMEOUT_S, ...), which only the
// user sets and only the runtime reads, are not part of this contract: they live in the runtime's
// table (elastic_mpi/src/tunables.cpp).
#pragma once

#include <span>
#include <string_view>

namespace elastic::contract {

// Names as character arrays: they convert to `const char*` (spank_setenv) and to string_view.
// Set by the plugin in every elastic job's batch step.
inline constexpr char kSpecVersion[] = "ELASTIC_SPEC_VERSION";
inline constexpr char kMode[] = "ELASTIC_MODE";
inline constexpr char kJobId[] = "ELASTIC_JOB_ID";
inline constexpr char kRole[] = "ELASTIC_ROLE";
inline constexpr char kController[] = "ELASTIC_CONTROLLER";
inline constexpr char kMungeSocket[] = "ELASTIC_MUNGE_SOCKET";
inline constexpr char kJoinToken[] = "ELASTIC_JOIN_TOKEN";
// The job's spec (JobSpec::ToEnvironment, job_spec.h).
inline constexpr char kGpusMin[] = "ELASTIC_GPUS_MIN";
inline constexpr char kGpusMax[] = "ELASTIC_GPUS_MAX";
inline constexpr char kGpuStep[] = "ELASTIC_GPU_STEP";
inline constexpr char kBatchMin[] = "ELASTIC_BATCH_MIN";
inline constexpr char kBatchMax[] = "ELASTIC_BATCH_MAX";
inline constexpr char kLocalBatchMin[] = "ELASTIC_LOCAL_BATCH_MIN";
inline constexpr char kLocalBatchMax[] = "ELASTIC_LOCAL_BATCH_MAX";
inline constexpr char kLrScaling[] = "ELASTIC_LR_SCALING";
inline constexpr char kModel[] = "ELASTIC_MODEL";
inline constexpr char kFuseMaxPerGpu[] = "ELASTIC_FUSE_MAX_PER_GPU";
// Set by the plugin in a fused sweep's tasks (--elastic-fuse), from elasticd's register reply.
inline constexpr char kFuseTrials[] = "ELASTIC_FUSE_TRIALS";
inline constexpr char kFuseLeader[] = "ELASTIC_FUSE_LEADER";
inline constexpr char kGpuTypes[] = "ELASTIC_GPU_TYPES";
// Set by the plugin in an extension job only.
inline constexpr char kParentJobId[] = "ELASTIC_PARENT_JOB_ID";
inline constexpr char kGroupId[] = "ELASTIC_GROUP_ID";
inline constexpr char kRendezvousUri[] = "ELASTIC_RENDEZVOUS_URI";
// Set by elastic-launch for the ranks it starts.
inline constexpr char kNodeGroup[] = "ELASTIC_NODE_GROUP";
inline constexpr char kNodeGroups[] = "ELASTIC_NODE_GROUPS";
// Where one launch started the job's initial world over several nodes (Open MPI 5): their number.
inline constexpr char kSpannedNodes[] = "ELASTIC_SPANNED_NODES";
inline constexpr char kLocalRank[] = "ELASTIC_LOCAL_RANK";
inline constexpr char kLocalSize[] = "ELASTIC_LOCAL_SIZE";
inline constexpr char kRunDir[] = "ELASTIC_RUN_DIR";
inline constexpr char kJoin[] = "ELASTIC_JOIN";
inline constexpr char kRelaunchFrom[] = "ELASTIC_RELAUNCH_FROM";
// Set by the user (tests, a plain mpirun); the plugin removes it from an elastic job.
inline constexpr char kStandalone[] = "ELASTIC_STANDALONE";

// The parties that set or read a variable, as bits of EnvVar::set_by and EnvVar::read_by.
namespace party {
inline constexpr unsigned kPlugin = 1u << 0;           // the SPANK plugin, in the batch step
inline constexpr unsigned kLauncher = 1u << 1;         // elastic-launch
inline constexpr unsigned kRuntime = 1u << 2;          // libelastic_mpi, in every rank
inline constexpr unsigned kTrainingProgram = 1u << 3;  // the user's program: documented for it
inline constexpr unsigned kUser = 1u << 4;             // the user's environment or job script
}  // namespace party

// One row of the table.
struct EnvVar {
  const char* name;
  unsigned set_by;   // party bits
  unsigned read_by;  // party bits; never 0: a variable nobody reads is not exported
  // The plugin removes the user's own value from an elastic job's environment before it sets
  // its own (a user must not forge, say, the join token or ELASTIC_STANDALONE).
  bool plugin_scrubs;
  // Belongs to one job or one launch: elastic-launch never copies it from the parent's
  // environment into the environment elasticd gives an extension's launcher.
  bool per_launch;
  const char* meaning;  // one line, as in docs/interfaces.md
};

// Every variable of the contract, in the order of docs/interfaces.md section 2.
std::span<const EnvVar> EnvVars() noexcept;

// The row of `name`, or nullptr when `name` is not part of the contract.
const EnvVar* FindEnvVar(std::string_view name) noexcept;

// What an extension's ranks inherit from the parent (docs/interfaces.md section 4, "What it
// runs"). The parent's launcher registers its environment, and elasticd submits each extension
// with it, so that the ranks that join run as the job's own ranks do: same search paths, same
// tunables of BLAS, OpenMP, NCCL, CUDA, PyTorch and MPI (a BLAS kernel chosen differently is
// enough to change a trial's result).
//
// Never carried, whatever the user asks: this table's per-launch variables, and the namespaces
// of Slurm (SLURM_*, SLURMD_*, SRUN_*, SBATCH_*, SALLOC_*, _SLURM_*, SPANK_*), of PMI and PMIx
// (PMI_*, PMIX_* but PMIX_MCA_*), of Open MPI's and PRRTE's launchers (OMPI_* but OMPI_MCA_*,
// PRTE_* but PRTE_MCA_*), which Slurm and the MPI launcher set for each job, step and rank; the
// MCA tunables are the user's. elasticd drops them too.
bool NeverCarriedToExtensions(std::string_view name) noexcept;

// Carried unless the user lists the name with `elastic-launch --export`: neither never carried
// nor one of the node's or the allocation's own (GPU visibility, TMPDIR, HOME, HOSTNAME, the
// shell's PWD/OLDPWD/SHLVL/_, the login session's SSH_*, XDG_RUNTIME_DIR,
// DBUS_SESSION_BUS_ADDRESS).
bool CarriedToExtensionsByDefault(std::string_view name) noexcept;

}  // namespace elastic::contract
