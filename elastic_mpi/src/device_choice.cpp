// The NCCL backend's device choice (device_choice.h).
#include "device_choice.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "check.h"
#include "elastic/common/log.h"

namespace elastic::mpi::detail {

namespace {

// FNV-1a: equal numbering texts give equal keys (a collision only makes two jobs avoid each
// other's device numbers, never share one).
std::int64_t NumberingKey(std::string_view numbering) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : numbering) h = (h ^ c) * 1099511628211ULL;
  return static_cast<std::int64_t>(h >> 1);
}

}  // namespace

Result<int> ChooseDevice(MPI_Comm world, int held, int devices, std::string_view numbering) {
  int rank = 0;
  ELASTIC_MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_Comm node = MPI_COMM_NULL;
  ELASTIC_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int node_rank = 0;
  int node_size = 0;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &node_size);
  const std::array<std::int64_t, 2> mine{NumberingKey(numbering), held};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(node_size));
  const int rc = MPI_Allgather(mine.data(), 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, node);
  MPI_Comm_free(&node);
  if (rc != MPI_SUCCESS) return MpiStatus(rc, "MPI_Allgather of the node's devices");
  if (held >= 0) {
    for (int r = 0; r < node_rank; ++r) {  // the program put two ranks' state on one GPU
      const auto i = 2 * static_cast<std::size_t>(r);
      if (all[i] == mine[0] && all[i + 1] == held) {
        Log(LogLevel::kWarning, "elastic_mpi", "rank ", rank, ": its state is on CUDA device ", held,
            " as another rank's on this node is: NCCL refuses two ranks on one GPU");
        break;
      }
    }
    return held;
  }
  // Devices held by ranks that number alike, and this rank's place among those choosing now.
  std::vector<bool> taken(static_cast<std::size_t>(devices), false);
  int place = 0;
  for (int r = 0; r < node_size; ++r) {
    const auto i = 2 * static_cast<std::size_t>(r);
    if (all[i] != mine[0]) continue;
    if (all[i + 1] >= 0 && all[i + 1] < devices) taken[static_cast<std::size_t>(all[i + 1])] = true;
    if (all[i + 1] < 0 && r < node_rank) ++place;
  }
  std::vector<int> free;
  for (int d = 0; d < devices; ++d) {
    if (!taken[static_cast<std::size_t>(d)]) free.push_back(d);
  }
  if (place < static_cast<int>(free.size())) return free[static_cast<std::size_t>(place)];
  const int shared = place % devices;
  Log(LogLevel::kWarning, "elastic_mpi", "rank ", rank, ": more ranks on this node than its ", devices,
      " visible GPUs: sharing CUDA device ", shared);
  return shared;
}

}  // namespace elastic::mpi::detail
