// Memory spaces inside the runtime (internal header): the host view of a buffer, for the paths
// that move a buffer through MPI or a file. Open MPI as packaged here is not CUDA-aware, so a
// buffer in device memory goes through a host copy there: the MPI backend's collectives on device
// buffers, the state hand-over and the checkpoints of registered device buffers.
#pragma once

#include <cstddef>
#include <vector>

#include "elastic/common/error.h"
#include "elastic_mpi/backend.h"

namespace elastic::mpi::detail {

// The CUDA device of device memory at p; -1 for host memory, without CUDA, or on an error.
int DeviceOf(const void* p) noexcept;

// The buffer itself when it is in host memory; a host copy of it when it is in device memory.
class HostView {
 public:
  // fill: copy the device bytes into the host copy (the buffer is read). kConfig for device
  // memory in a build without CUDA; kUnavailable on a CUDA error.
  static Result<HostView> Of(void* data, std::size_t bytes, MemorySpace space, bool fill);
  void* data() noexcept { return space_ == MemorySpace::kHost ? data_ : copy_.data(); }
  // The buffer was written through data(): copies the host copy back to the device (nothing
  // for host memory). kUnavailable on a CUDA error.
  Status WriteBack();

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  MemorySpace space_ = MemorySpace::kHost;
  std::vector<unsigned char> copy_;
};

}  // namespace elastic::mpi::detail
