// The elastic job specification: the values of the plugin's sbatch options, how each is
// parsed, and the checks across options and against the site's limits. No Slurm here, so that
// every rule is unit-tested (tests/spank_plugin) and fuzzed on its own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/common/job_spec.h"
#include "site_config.h"

namespace elastic::spank {

// The plugin's options, in the order they appear in --help.
enum class OptionId : int {
  kGpus = 1,       // --elastic-gpus=MIN:MAX
  kGpuStep,        // --elastic-gpu-step=N
  kBatch,          // --elastic-batch=MIN:MAX
  kLocalBatch,     // --elastic-local-batch=MIN:MAX
  kLrScaling,      // --elastic-lr-scaling=none|linear|sqrt|adascale
  kModel,          // --elastic-model=NAME
  kFuse,           // --elastic-fuse=MAX_PER_GPU (array jobs: the tasks train fused)
  kGpuTypes,       // --elastic-gpu-types=TYPE,TYPE
  kNoElastic,      // --no-elastic
  kExtension,      // --elastic-extension=PARENT:GROUP (set by elasticd on extension jobs)
};

struct OptionInfo {
  OptionId id;
  const char* name;     // without the leading dashes
  const char* arginfo;  // nullptr: the option takes no argument
  const char* usage;    // help text, starts with "[elastic]"
};
// Every option, in --help order.
const std::vector<OptionInfo>& Options();
const OptionInfo& Info(OptionId id);

struct Range {
  int64_t min = 0;
  int64_t max = 0;
  bool operator==(const Range&) const = default;
};

// Absolute bounds, whatever the site allows.
inline constexpr int64_t kMaxGpus = 100000;
inline constexpr int64_t kMaxBatch = 1000000000;
inline constexpr int64_t kMaxModelNameLength = 64;
inline constexpr int64_t kMaxFusePerGpu = 64;  // trials one GPU trains fused, at most

struct ExtensionRef {
  uint32_t parent = 0;
  uint32_t group = 0;
  bool operator==(const ExtensionRef&) const = default;
};

struct ElasticSpec {
  std::optional<Range> gpus;
  std::optional<int64_t> gpu_step;
  std::optional<Range> batch;
  std::optional<Range> local_batch;
  std::optional<std::string> lr_scaling;
  std::optional<std::string> model;
  std::optional<int64_t> fuse;  // --elastic-fuse: the most trials per GPU
  std::optional<std::vector<std::string>> gpu_types;  // syntax checked; known types in Validate
  bool no_elastic = false;
  std::optional<ExtensionRef> extension;

  // Any of the user-facing elastic options was given (everything but --no-elastic).
  bool AnyElasticOption() const;
  // The job asked for elasticity and did not turn it off.
  bool Elastic() const { return gpus.has_value() && !no_elastic; }
};

// Applies one option value (as Slurm hands it to the option callback; nullptr for options
// without an argument). Idempotent: the same value twice is accepted, because Slurm may call
// a callback twice; a different second value is refused. Messages name the option and say
// what is allowed.
Status SetOption(ElasticSpec& spec, OptionId id, const char* value);

// Checks across options and against the site's limits, after every option has been seen.
// Fills defaults from the site (lr scaling, gpu step). Does not look at the job's own GPU
// request (see CheckBaseGpus, CheckOwnGpuType). `known_gpu_types`: the cluster's GPU types
// (site.gpu_types, else what slurmctld reports); --elastic-gpu-types may name only these (empty:
// not checked).
Status Validate(ElasticSpec& spec, const SiteConfig& site, const std::vector<std::string>& known_gpu_types = {});

// The job's own GPU allocation must equal --elastic-gpus MIN (MIN is the base request).
Status CheckBaseGpus(const ElasticSpec& spec, int64_t allocated_gpus);

// --elastic-fuse is for job arrays only: `array_job` says whether the job is one (at submission:
// sbatch was given --array; in the batch step: the job is an array task).
Status CheckFusedArray(const ElasticSpec& spec, bool array_job);
// The job's own GPUs (of type `job_type`, "" when untyped or mixed) must be of a type that
// --elastic-gpu-types lists (no list: always fine).
Status CheckOwnGpuType(const ElasticSpec& spec, const std::string& job_type);

// The spec as it travels to elasticd and to the job (common/include/elastic/common/job_spec.h),
// with the defaults the plugin has always sent: gpu step 1, lr scaling "none".
contract::JobSpec ToJobSpec(const ElasticSpec& spec);

// ELASTIC_* variables that describe the spec (docs/interfaces.md, section 2), without the
// mode, ids, address and token, which the caller adds: ToJobSpec(spec).ToEnvironment().
std::map<std::string, std::string> SpecEnvironment(const ElasticSpec& spec);

// The spec in one line, e.g. "gpus=2:8 step=2 batch=256:4096 lr=sqrt" (logs, job control env).
std::string Describe(const ElasticSpec& spec);

}  // namespace elastic::spank
