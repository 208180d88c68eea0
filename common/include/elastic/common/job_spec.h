// The elastic job's specification as it travels between components: the plugin validates the
// sbatch options (spank_plugin/src/spec.h) and sends this to elasticd in the `register` message
// (docs/interfaces.md section 3) and to the job as ELASTIC_* variables (section 2); elasticd keeps
// the JSON with the job and hands it to extension jobs, whose plugin exports it again.
//
// Every field is optional, bound by bound, because the JSON elasticd stores is read back
// tolerantly: a missing key, or one of the wrong type, is an absent value and the reader applies
// its own default (the accessors below hold the defaults the components share). A reader of the
// stored JSON by key and fallback maps onto it one to one: the value of "batch_min" or else F is
// JobSpec::FromJson(j).batch.min.value_or(F); "gpus_max" or else the base size is GpusMax(base);
// max(1, "gpu_step" or else 1) is GpuStep(); "lr_scaling" or else "none" is LrScaling();
// "gpu_types" split at commas, or else none, is GpuTypes().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace elastic::contract {

// The two ends of a range, each of which may be absent in stored JSON.
struct Bounds {
  std::optional<int64_t> min;
  std::optional<int64_t> max;
  bool operator==(const Bounds&) const = default;
};

struct JobSpec {
  Bounds gpus;                            // gpus_min (the base request), gpus_max
  std::optional<int64_t> gpu_step;        // GPU counts are multiples of this
  Bounds batch;                           // global batch, in samples
  Bounds local_batch;                     // per-GPU batch, in samples
  std::optional<std::string> lr_scaling;  // none, linear, sqrt or adascale
  std::optional<std::string> model;       // a throughput profile's name
  std::optional<int64_t> fuse_max_per_gpu;  // a fused sweep array: the most trials per GPU
  std::optional<std::string> gpu_types;   // the GPU types the job accepts, "a100,v100" (gpu_types.h)

  // The largest GPU count; `base_gpus` (the job's own allocation) when the spec has none.
  int64_t GpusMax(int64_t base_gpus) const { return gpus.max.value_or(base_gpus); }
  // The GPU step, at least 1 (1 when absent).
  int64_t GpuStep() const { return gpu_step && *gpu_step > 1 ? *gpu_step : 1; }
  // The learning-rate rule; "none" when absent.
  std::string LrScaling() const { return lr_scaling.value_or("none"); }
  // The accepted GPU types, in the order given; empty when absent (the job stays on its type).
  // Read tolerantly: empty items are skipped.
  std::vector<std::string> GpuTypes() const;

  // The JSON object of the `register` message: exactly the present fields, under the keys
  // gpus_min, gpus_max, gpu_step, batch_min, batch_max, local_batch_min, local_batch_max,
  // fuse_max_per_gpu, lr_scaling, model, gpu_types.
  nlohmann::json ToJson() const;
  // Reads those keys back. Tolerant as elasticd has always been: a key that is missing or not an
  // integer (lr_scaling, model: not a string) is absent; other keys are ignored; anything but an
  // object gives an empty spec. Never throws.
  static JobSpec FromJson(const nlohmann::json& j);

  // The job's variables: ELASTIC_SPEC_VERSION=1 and one ELASTIC_* variable per present field
  // (env_vars.h: kGpusMin ... kFuseMaxPerGpu). The caller adds mode, ids, address and token.
  std::map<std::string, std::string> ToEnvironment() const;
  // A fused sweep array (--elastic-fuse).
  bool Fused() const { return fuse_max_per_gpu.has_value() && *fuse_max_per_gpu >= 1; }
  // Reads the spec variables back from (name -> value), e.g. a job's environment; as tolerant as
  // FromJson (a value that is not a decimal integer is absent).
  static JobSpec FromEnvironment(const std::map<std::string, std::string>& env);

  bool operator==(const JobSpec&) const = default;
};

// The value of ELASTIC_SPEC_VERSION this definition writes.
inline constexpr char kSpecVersionValue[] = "1";

}  // namespace elastic::contract
