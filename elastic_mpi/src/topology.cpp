#include "elastic_mpi/topology.h"

#include <hwloc.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

namespace elastic::mpi {
namespace {

constexpr unsigned kNvidiaVendor = 0x10de;

// Owns a loaded topology.
struct TopologyDeleter {
  void operator()(hwloc_topology* t) const noexcept { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

Result<TopologyPtr> Load() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return Status(ErrorKind::kUnavailable, "hwloc_topology_init failed");
  TopologyPtr topo(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);  // PCI devices: the GPUs
  if (hwloc_topology_load(raw) != 0) return Status(ErrorKind::kUnavailable, "hwloc_topology_load failed");
  return topo;
}

// The node's topology with its PCI devices, loaded once per process: loading it (PCI discovery
// included) takes tens of milliseconds, and binding runs again after every rescale. Queries on a
// loaded topology are thread-safe; it is never modified after the load.
Result<hwloc_topology_t> SharedTopology() {
  static std::once_flag once;
  static TopologyPtr topology;
  static Status failure = Status::Ok();
  std::call_once(once, [] {
    auto loaded = Load();
    if (loaded.ok()) {
      topology = std::move(loaded).value();
    } else {
      failure = loaded.status();
    }
  });
  if (!topology) return failure;
  return topology.get();
}

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const noexcept { hwloc_bitmap_free(b); }
};
using BitmapPtr = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

std::string BitmapList(hwloc_const_bitmap_t set) {
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, set) < 0 || text == nullptr) return "";
  std::string s(text);
  std::free(text);
  return s;
}

std::vector<hwloc_obj_t> NvidiaGpus(hwloc_topology_t topo) {
  std::vector<hwloc_obj_t> gpus;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topo, pci)) {
    // Class 0x03xx: display controllers (VGA 0x0300, 3D 0x0302).
    if (pci->attr->pcidev.vendor_id == kNvidiaVendor && (pci->attr->pcidev.class_id >> 8) == 0x03) {
      gpus.push_back(pci);
    }
  }
  return gpus;
}

}  // namespace

std::string TopologySummary::ToJson() const {
  nlohmann::json j = {{"numa", numa_nodes}, {"cores", cores}, {"pus", pus}, {"gpus", nlohmann::json::array()}};
  for (const GpuInfo& g : gpus) {
    char vendor[16];
    char device[16];
    std::snprintf(vendor, sizeof vendor, "0x%04x", g.vendor_id);
    std::snprintf(device, sizeof device, "0x%04x", g.device_id);
    j["gpus"].push_back({{"pci", g.pci_bus_id}, {"vendor", vendor}, {"device", device}, {"numa", g.numa_node}});
  }
  return j.dump();
}

Result<TopologySummary> DescribeTopology() {
  auto loaded = SharedTopology();
  if (!loaded.ok()) return loaded.status();
  hwloc_topology_t topo = loaded.value();
  TopologySummary s;
  s.numa_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  s.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  s.pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  for (hwloc_obj_t pci : NvidiaGpus(topo)) {
    GpuInfo g;
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain,
                  pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
    g.pci_bus_id = bus;
    g.vendor_id = pci->attr->pcidev.vendor_id;
    g.device_id = pci->attr->pcidev.device_id;
    hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topo, pci);
    if (parent != nullptr && parent->nodeset != nullptr) {
      const int first = hwloc_bitmap_first(parent->nodeset);  // OS index of the nearest NUMA node
      if (first >= 0) {
        hwloc_obj_t numa = hwloc_get_numanode_obj_by_os_index(topo, static_cast<unsigned>(first));
        if (numa != nullptr) g.numa_node = static_cast<int>(numa->logical_index);
      }
    }
    s.gpus.push_back(g);
  }
  return s;
}

Result<std::string> BindToShare(int node_rank, int node_size) {
  if (node_size <= 0 || node_rank < 0 || node_rank >= node_size) {
    return Status(ErrorKind::kInvalidArgument, "BindToShare: rank " + std::to_string(node_rank) +
                                                   " of " + std::to_string(node_size));
  }
  auto loaded = SharedTopology();
  if (!loaded.ok()) return loaded.status();
  hwloc_topology_t topo = loaded.value();

  // The pool of cores this rank shares with others, and its index among them.
  hwloc_const_cpuset_t pool = hwloc_topology_get_topology_cpuset(topo);
  int index = node_rank;
  int sharers = node_size;
  const std::vector<hwloc_obj_t> gpus = NvidiaGpus(topo);
  if (!gpus.empty()) {
    const int g = static_cast<int>(gpus.size());
    hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topo, gpus[static_cast<std::size_t>(node_rank % g)]);
    if (near != nullptr && near->cpuset != nullptr) pool = near->cpuset;
    index = node_rank / g;
    sharers = (node_size - node_rank % g + g - 1) / g;
  }
  const int cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, pool, HWLOC_OBJ_CORE);
  if (cores <= 0) return Status(ErrorKind::kUnavailable, "no cores in the binding pool");
  BitmapPtr set(hwloc_bitmap_alloc());
  if (sharers <= cores) {
    // Contiguous block of cores, sizes differ by at most one.
    const int base = cores / sharers;
    const int extra = cores % sharers;
    const int first = index * base + std::min(index, extra);
    const int count = base + (index < extra ? 1 : 0);
    for (int c = first; c < first + count; ++c) {
      hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(topo, pool, HWLOC_OBJ_CORE, static_cast<unsigned>(c));
      if (core != nullptr) hwloc_bitmap_or(set.get(), set.get(), core->cpuset);
    }
  } else {  // oversubscribed: several ranks per core
    hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(topo, pool, HWLOC_OBJ_CORE, static_cast<unsigned>(index % cores));
    if (core != nullptr) hwloc_bitmap_copy(set.get(), core->cpuset);
  }
  if (hwloc_bitmap_iszero(set.get())) return Status(ErrorKind::kUnavailable, "empty binding set");
  if (hwloc_set_cpubind(topo, set.get(), HWLOC_CPUBIND_PROCESS) != 0) {
    return Status(ErrorKind::kUnavailable, "hwloc_set_cpubind failed for " + BitmapList(set.get()));
  }
  return BitmapList(set.get());
}

}  // namespace elastic::mpi
