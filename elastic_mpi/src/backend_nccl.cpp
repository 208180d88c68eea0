// The NCCL backend (device buffers). Compiled only when CMake finds CUDA and NCCL; used only when
// every rank sees a GPU (MakeBackend). Growth creates a new communicator from a fresh unique id
// broadcast over the merged MPI world; on a collective error the communicator is aborted.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "check.h"
#include "elastic/common/log.h"
#include "elastic_mpi/backend.h"

#define ELASTIC_NCCL_CHECK(call)                                                              \
  do {                                                                                        \
    const ncclResult_t elastic_nrc_ = (call);                                                 \
    if (elastic_nrc_ != ncclSuccess) {                                                        \
      return ::elastic::Status(::elastic::ErrorKind::kUnavailable,                            \
                               std::string(#call " failed: ") + ncclGetErrorString(elastic_nrc_)); \
    }                                                                                         \
  } while (0)

#define ELASTIC_CUDA_CHECK(call)                                                              \
  do {                                                                                        \
    const cudaError_t elastic_crc_ = (call);                                                  \
    if (elastic_crc_ != cudaSuccess) {                                                        \
      return ::elastic::Status(::elastic::ErrorKind::kUnavailable,                            \
                               std::string(#call " failed: ") + cudaGetErrorString(elastic_crc_)); \
    }                                                                                         \
  } while (0)

namespace elastic::mpi {
namespace {

class NcclBackend final : public CollectiveBackend {
 public:
  explicit NcclBackend(int device) : device_(device) {}
  ~NcclBackend() override { Destroy(/*abort=*/false); }

  std::string_view name() const noexcept override { return "nccl"; }
  MemorySpace memory_space() const noexcept override { return MemorySpace::kDevice; }

  Status AllreduceSum(float* data, std::size_t count) override {
    return Finish(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_));
  }
  Status AllreduceSum(double* data, std::size_t count) override {
    return Finish(ncclAllReduce(data, data, count, ncclFloat64, ncclSum, comm_, stream_));
  }
  Status Broadcast(void* data, std::size_t bytes, int root) override {
    return Finish(ncclBroadcast(data, data, bytes, ncclChar, root, comm_, stream_));
  }

  Status Rebuild(MPI_Comm world) override {
    Destroy(/*abort=*/false);
    int rank = 0;
    int size = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_rank(world, &rank));
    ELASTIC_MPI_CHECK(MPI_Comm_size(world, &size));
    ELASTIC_CUDA_CHECK(cudaSetDevice(device_));
    if (stream_ == nullptr) ELASTIC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ncclUniqueId id{};
    if (rank == 0) ELASTIC_NCCL_CHECK(ncclGetUniqueId(&id));
    ELASTIC_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, world));
    ELASTIC_NCCL_CHECK(ncclCommInitRank(&comm_, size, id, rank));
    return Status::Ok();
  }

 private:
  // Waits for the collective; aborts the communicator on any error so no rank blocks in it.
  Status Finish(ncclResult_t issued) {
    if (issued != ncclSuccess) {
      const std::string message = std::string("NCCL collective failed: ") + ncclGetErrorString(issued);
      Destroy(/*abort=*/true);
      return Status(ErrorKind::kUnavailable, message);
    }
    const cudaError_t rc = cudaStreamSynchronize(stream_);
    if (rc != cudaSuccess) {
      Destroy(/*abort=*/true);
      return Status(ErrorKind::kUnavailable,
                    std::string("cudaStreamSynchronize failed: ") + cudaGetErrorString(rc));
    }
    return Status::Ok();
  }

  void Destroy(bool abort) noexcept {
    if (comm_ != nullptr) {
      if (abort) {
        ncclCommAbort(comm_);
      } else {
        ncclCommDestroy(comm_);
      }
      comm_ = nullptr;
    }
  }

  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<CollectiveBackend>> MakeNcclBackend(MPI_Comm world, int device) {
  auto backend = std::make_unique<NcclBackend>(device);
  if (Status s = backend->Rebuild(world); !s.ok()) return s;
  Log(LogLevel::kInfo, "elastic_mpi", "NCCL backend on CUDA device ", device);
  return std::unique_ptr<CollectiveBackend>(std::move(backend));
}

}  // namespace elastic::mpi
