// Memory spaces: their names, the CUDA pointer query of the C API, and host views of device
// buffers (memory_space.h). Compiled with and without CUDA: without it, there is no device memory.
#include "memory_space.h"

#include <string>

#if ELASTIC_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace elastic::mpi {

std::string_view MemorySpaceName(MemorySpace space) noexcept {
  return space == MemorySpace::kDevice ? "device" : "host";
}

MemorySpace QueryMemorySpace(const void* p) noexcept {
#if ELASTIC_HAVE_NCCL
  cudaPointerAttributes attributes{};
  if (p == nullptr || cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver, or a pointer CUDA does not know: host memory
    return MemorySpace::kHost;
  }
  const bool device = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  return device ? MemorySpace::kDevice : MemorySpace::kHost;
#else
  (void)p;
  return MemorySpace::kHost;
#endif
}

namespace detail {

int DeviceOf(const void* p) noexcept {
#if ELASTIC_HAVE_NCCL
  cudaPointerAttributes attributes{};
  if (p == nullptr || cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
#else
  (void)p;
  return -1;
#endif
}

namespace {

// dst <- src, bytes, in the given direction (cudaMemcpy: synchronous for the host).
Status Copy(void* dst, const void* src, std::size_t bytes, bool to_device) {
#if ELASTIC_HAVE_NCCL
  const cudaError_t rc = cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    return Status(ErrorKind::kUnavailable, std::string("copying a device buffer ") + (to_device ? "from" : "to") +
                                               " host memory failed: " + cudaGetErrorString(rc));
  }
  return Status::Ok();
#else
  (void)dst, (void)src, (void)bytes, (void)to_device;
  return Status(ErrorKind::kConfig, "a buffer in device memory, but this build of elastic_mpi has no CUDA");
#endif
}

}  // namespace

Result<HostView> HostView::Of(void* data, std::size_t bytes, MemorySpace space, bool fill) {
  HostView view;
  view.data_ = data;
  view.bytes_ = bytes;
  view.space_ = space;
  if (space == MemorySpace::kHost) return view;
#if !ELASTIC_HAVE_NCCL
  return Copy(nullptr, nullptr, 0, false);  // the kConfig error, even for an empty buffer
#endif
  view.copy_.resize(bytes);
  if (fill && bytes > 0) {
    if (Status s = Copy(view.copy_.data(), data, bytes, /*to_device=*/false); !s.ok()) return s;
  }
  return view;
}

Status HostView::WriteBack() {
  if (space_ == MemorySpace::kHost || bytes_ == 0) return Status::Ok();
  return Copy(data_, copy_.data(), bytes_, /*to_device=*/true);
}

}  // namespace detail

}  // namespace elastic::mpi
