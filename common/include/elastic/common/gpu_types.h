// The GPU types an elastic job accepts (--elastic-gpu-types=a100,v100): the list's parsing and
// its checks against the cluster's types and the job's own GPU request, shared by the SPANK
// plugin (at submission and when the batch step starts) and unit-tested on their own. The list
// travels in the job's spec (job_spec.h: "gpu_types", ELASTIC_GPU_TYPES); elasticd may move the
// job between these types (docs/admin-guide.md, "Jobs across GPU types").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::contract {

// The longest type name accepted (Slurm's GRES type names are short: a100, v100, rtx6000).
inline constexpr size_t kMaxGpuTypeLength = 32;

// Parses "a100,v100": comma-separated type names, each of letters, digits, '-', '_' and '.',
// at most kMaxGpuTypeLength characters. Refuses an empty list, empty items and a type given
// twice; `known`, when not empty, are the cluster's types, and a name not among them is refused
// with the list of known ones. Messages start with `flag` (e.g. "--elastic-gpu-types") and say
// what to do.
Result<std::vector<std::string>> ParseGpuTypes(std::string_view text, const std::vector<std::string>& known,
                                               std::string_view flag);

// The job's own GPU request must be on one of the types it accepts: `job_type` is the type of
// its GPUs ("" when untyped or of several types). An untyped request is refused too: elasticd
// could not tell which type the job runs on.
Status CheckOwnGpuType(const std::vector<std::string>& types, const std::string& job_type, std::string_view flag);

// "a100,v100".
std::string JoinGpuTypes(const std::vector<std::string>& types);

}  // namespace elastic::contract
