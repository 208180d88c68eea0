// A heterogeneous cluster described by a file (elastic-sim --cluster FILE): per GPU type its
// name, nodes, GPUs per node and the measurement profile its step times come from (the suffix of
// the Sia artifact's per-type files: aws = T4, dgx-ext = A100, rtx = RTX 2080Ti,
// quad = Quadro RTX 6000, azure = V100; dgx = A100 with fewer batch sizes).
//
// Format: one type per line, four whitespace-separated fields `NAME NODES GPUS_PER_NODE
// PROFILE`; `#` starts a comment; blank lines are ignored. Sia's default cluster:
//   # name  nodes  gpus_per_node  profile
//   t4      6      4              aws
//   a100    2      8              dgx-ext
//   rtx     3      8              rtx
#pragma once

#include <string>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::simulator {

struct ClusterType {
  std::string name;     // unique within the file
  int nodes = 0;        // >= 1
  int gpus_per_node = 0;  // >= 1
  std::string profile;  // measurement suffix: placements-PROFILE.csv, scalability-PROFILE.csv
  int capacity() const noexcept { return nodes * gpus_per_node; }
};

struct ClusterSpec {
  std::vector<ClusterType> types;  // in the file's order (at least one)
  int TotalGpus() const noexcept;
  int TypeIndex(const std::string& name) const noexcept;  // -1 when absent
};

// The profiles the Sia artifact measured (what PROFILE may be).
const std::vector<std::string>& KnownProfiles();

// Parses the text of a cluster file; `path` names it in errors ("FILE:LINE: message"),
// kInvalidArgument for a malformed line, kInvalidArgument for an empty file.
Result<ClusterSpec> ParseClusterFile(const std::string& text, const std::string& path);
// Reads and parses `path`; kNotFound when it cannot be read.
Result<ClusterSpec> ReadClusterFile(const std::string& path);

}  // namespace elastic::simulator
