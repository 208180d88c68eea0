// Node topology with hwloc: a summary for the controller's placement, and binding of ranks.
#pragma once

#include <string>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::mpi {

struct GpuInfo {
  std::string pci_bus_id;  // "0000:17:00.0"
  unsigned vendor_id = 0;  // 0x10de for NVIDIA
  unsigned device_id = 0;
  int numa_node = -1;      // logical index of the nearest NUMA node, -1 when unknown
};

struct TopologySummary {
  int numa_nodes = 0;
  int cores = 0;
  int pus = 0;                 // hardware threads
  std::vector<GpuInfo> gpus;   // PCI devices of vendor 0x10de (Debian's hwloc has no CUDA backend)
  // {"numa": N, "cores": C, "pus": P, "gpus": [{"pci": "...", "vendor": "0x10de", ...}]}
  std::string ToJson() const;
};

// Loads the topology (with I/O devices) and summarises it. kUnavailable when hwloc fails.
Result<TopologySummary> DescribeTopology();

// Binds the calling process to its share of the node's cores: with g GPUs, rank r of the node
// (0 <= r < size) uses the cores near GPU r % g, split among the ranks sharing that GPU;
// without GPUs the node's cores are split evenly (oversubscribed: core r % cores). Returns the
// bound cpuset as a list string ("0-3"). kUnavailable when hwloc cannot bind.
Result<std::string> BindToShare(int node_rank, int node_size);

}  // namespace elastic::mpi
