#include "elastic_mpi/tunables.h"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "elastic/common/env_vars.h"

namespace elastic::mpi {
namespace {

// The one table. Contract variables (set by the SPANK plugin or elastic-launch; their names and
// who sets them are defined once in common/include/elastic/common/env_vars.h) come first, then
// the runtime's own tunables.
constexpr std::array kTable{
    // Contract variables.
    Tunable{"mode", contract::kMode, "elastic", "elastic or rigid (rigid: never rescale)"},
    Tunable{"job_id", contract::kJobId, "standalone", "Slurm job id of the elastic job"},
    Tunable{"role", contract::kRole, "parent", "parent or extension"},
    Tunable{"controller", contract::kController, "", "elasticd address HOST:PORT"},
    Tunable{"munge_socket", contract::kMungeSocket, "", "munged's socket for messages to elasticd"},
    Tunable{"metrics_interval_s", "ELASTIC_METRICS_INTERVAL_S", "5", "seconds between metrics reports to elasticd"},
    Tunable{"gpus_on_node", "SLURM_GPUS_ON_NODE", "", "GPUs of the job on this node (launcher's default rank count)"},
    Tunable{"gpus_max", contract::kGpusMax, "", "upper bound of the GPU count"},
    Tunable{"batch_min", contract::kBatchMin, "", "lower bound of the global batch"},
    Tunable{"batch_max", contract::kBatchMax, "", "upper bound of the global batch"},
    Tunable{"local_batch_min", contract::kLocalBatchMin, "", "lower bound of the per-rank batch"},
    Tunable{"local_batch_max", contract::kLocalBatchMax, "", "upper bound of the per-rank batch"},
    Tunable{"lr_scaling", contract::kLrScaling, "none", "none, linear, sqrt or adascale"},
    Tunable{"join_token", contract::kJoinToken, "", "32 hex digits proving elasticd sent this group"},
    Tunable{"group_id", contract::kGroupId, "0", "id of this rank's group (0 = base job)"},
    Tunable{"node_group", contract::kNodeGroup, "0", "index of this node group in the job"},
    Tunable{"node_groups", contract::kNodeGroups, "1", "number of the job's initial node groups (merged into one world)"},
    Tunable{"spanned_nodes", contract::kSpannedNodes, "1",
            "nodes of the job's initial world, started by one launch whose other launchers hold them (no relaunch)"},
    Tunable{"slurm_node_id", "SLURM_NODEID", "", "this node's index in the step (launcher's default node group)"},
    Tunable{"slurm_step_nodes", "SLURM_STEP_NUM_NODES", "", "nodes of the step (launcher's default node group count)"},
    Tunable{"local_rank", contract::kLocalRank, "", "rank within the node group"},
    Tunable{"local_size", contract::kLocalSize, "", "size of the node group"},
    Tunable{"rendezvous_uri", contract::kRendezvousUri, "", "ompi-server URI file of the job"},
    // Runtime tunables.
    Tunable{"log_level", "ELASTIC_LOG_LEVEL", "info", "error, warning, info, verbose, debug"},
    Tunable{"connect_timeout_s", "ELASTIC_CONNECT_TIMEOUT_S", "60",
            "deadline of connect/accept; a joiner that has not connected by then is released and the grow abandoned (s)"},
    Tunable{"collective_timeout_s", "ELASTIC_COLLECTIVE_TIMEOUT_S", "20",
            "a collective this late probes every peer: a rank gone ends the world, a slow one is waited for (s; 0: off)"},
    Tunable{"stall_timeout_s", "ELASTIC_STALL_TIMEOUT_S", "1800",
            "a collective late this long with every rank alive ends the world (s; 0: never)"},
    Tunable{"grow_phase_timeout_s", "ELASTIC_GROW_PHASE_TIMEOUT_S", "60",
            "deadline of each grow phase after the accept (merge, state hand-over, backend grow); a grow that misses it is abandoned (s)"},
    Tunable{"spawn_timeout_s", "ELASTIC_SPAWN_TIMEOUT_S", "60", "watchdog on MPI_Comm_spawn (s)"},
    Tunable{"poll_interval_s", "ELASTIC_POLL_INTERVAL_S", "1", "how often rank 0 polls for commands (s)"},
    Tunable{"run_dir", contract::kRunDir, "", "the job's private directory"},
    Tunable{"relaunch_from", contract::kRelaunchFrom, "", "the relaunch record a world started again reads (elastic-launch)"},
    Tunable{"checkpoint_dir", "ELASTIC_CHECKPOINT_DIR", "", "where checkpoints go"},
    Tunable{"checkpoint_interval_s", "ELASTIC_CHECKPOINT_INTERVAL_S", "0",
            "checkpoint at the first rescale point after this many seconds (0: on request only)"},
    Tunable{"standalone", contract::kStandalone, "0", "1: no controller, no Slurm"},
    Tunable{"join", contract::kJoin, "0", "1: this group joins a running world (connect)"},
    Tunable{"schedule", "ELASTIC_SCHEDULE", "", "standalone rescale schedule, e.g. 2->4:128->2"},
    Tunable{"schedule_every", "ELASTIC_SCHEDULE_EVERY", "10", "steps between schedule entries"},
    Tunable{"respawn_delay_s", "ELASTIC_RESPAWN_DELAY_S", "1", "pause between a shrink and the next spawn (s)"},
    Tunable{"command_dir", "ELASTIC_COMMAND_DIR", "", "directory polled for command files (tests)"},
    Tunable{"test_kill_at", "ELASTIC_TEST_KILL_AT", "",
            "tests: a joiner's rank 0 SIGKILLs itself at this grow phase (connect, merge or state) or "
            "confirms the state late (late-confirm)"},
    Tunable{"backend", "ELASTIC_BACKEND", "auto", "collective backend: auto, mpi or nccl"},
    Tunable{"nccl_timeout_s", "ELASTIC_NCCL_TIMEOUT_S", "120",
            "deadline on NCCL communicator init, shrink, grow and finalize (s): abort on expiry"},
    Tunable{"slurm_job_id", "SLURM_JOB_ID", "", "Slurm job of this process (with CUDA_VISIBLE_DEVICES: GPU numbering)"},
    Tunable{"cuda_visible_devices", "CUDA_VISIBLE_DEVICES", "", "GPUs of this process, as its job numbers them"},
    Tunable{"grad_noise_ema", "ELASTIC_GRAD_NOISE_EMA", "0.9", "smoothing of gradient-noise statistics"},
    Tunable{"hierarchical", "ELASTIC_HIERARCHICAL_ALLREDUCE", "0",
            "MPI backend: reduce within each launch, then across launches (merged worlds)"},
    Tunable{"bind", "ELASTIC_BIND", "1", "bind each rank to its share of the node's cores"},
    Tunable{"rendezvous_if", "ELASTIC_RENDEZVOUS_IF", "", "interface ompi-server listens on (launcher)"},
    Tunable{"submit_dir", "SLURM_SUBMIT_DIR", "", "Slurm's submit directory (default run dir parent)"},
    Tunable{"metrics_file", "ELASTIC_METRICS_FILE", "", "JSON-lines file for step metrics (rank 0)"},
    Tunable{"total_samples", "ELASTIC_TOTAL_SAMPLES", "0",
            "samples the job trains in all, e.g. epochs x dataset size (0: unknown); reported to elasticd"},
};

const Tunable* Find(std::string_view name) {
  for (const Tunable& t : kTable) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

std::span<const Tunable> Tunables() noexcept { return kTable; }

Config Config::FromEnvironment() {
  Config config;
  for (const Tunable& t : kTable) {
    const std::string env(t.env);
    if (const char* value = std::getenv(env.c_str()); value != nullptr) {  // the one getenv
      config.values_[std::string(t.name)] = value;
    }
  }
  return config;
}

Result<Config> Config::FromMap(const std::map<std::string, std::string>& values) {
  Config config;
  for (const auto& [env, value] : values) {
    const Tunable* found = nullptr;
    for (const Tunable& t : kTable) {
      if (t.env == env) found = &t;
    }
    if (found == nullptr) {
      return Status(ErrorKind::kInvalidArgument, "unknown variable " + env);
    }
    config.values_[std::string(found->name)] = value;
  }
  return config;
}

std::string Config::Get(std::string_view name) const {
  const Tunable* t = Find(name);
  if (t == nullptr) throw Error(ErrorKind::kInternal, "no tunable named " + std::string(name));
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  return std::string(t->default_value);
}

bool Config::IsSet(std::string_view name) const { return values_.find(name) != values_.end(); }

Status Config::Set(std::string_view name, std::string value) {
  if (Find(name) == nullptr) {
    return Status(ErrorKind::kInvalidArgument, "no tunable named " + std::string(name));
  }
  values_[std::string(name)] = std::move(value);
  return Status::Ok();
}

namespace {
Status Malformed(std::string_view name, const std::string& value, std::string_view expected) {
  const Tunable* t = Find(name);
  return Status(ErrorKind::kConfig, std::string(t->env) + "='" + value + "' is not " +
                                        std::string(expected));
}
}  // namespace

Result<double> Config::GetDouble(std::string_view name) const {
  const std::string value = Get(name);
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(value.c_str(), &end);
  if (value.empty() || errno != 0 || end == nullptr || *end != '\0') {
    return Malformed(name, value, "a number");
  }
  return d;
}

Result<std::int64_t> Config::GetInt(std::string_view name) const {
  const std::string value = Get(name);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || end == nullptr || *end != '\0') {
    return Malformed(name, value, "an integer");
  }
  return static_cast<std::int64_t>(v);
}

Result<bool> Config::GetBool(std::string_view name) const {
  const std::string value = Get(name);
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off" || value.empty()) {
    return false;
  }
  return Malformed(name, value, "a boolean (1/0, true/false, yes/no, on/off)");
}

}  // namespace elastic::mpi
