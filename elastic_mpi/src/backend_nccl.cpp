// The NCCL backend (device buffers). Compiled only when CMake finds CUDA and NCCL; used only when
// every rank sees a GPU (MakeBackend). It follows the world in place where the library can:
//
//   shrink: ncclCommShrink (NCCL >= 2.27) among the survivors, NCCL_SHRINK_DEFAULT;
//   grow:   ncclCommGetUniqueId + ncclCommGrow (NCCL >= 2.29), the newcomers joining;
//   else:   a new communicator from a fresh unique id broadcast over the new MPI world.
//
// The choice is made at build time from the NCCL headers' NCCL_VERSION_CODE (below), so a build
// against NCCL 2.28 shrinks in place and grows by a new communicator. Ranks of the NCCL
// communicator are the MPI world's ranks throughout: ncclCommShrink renumbers the survivors in
// order, as MPI_Comm_split does, and ncclCommGrow appends the newcomers, as the merge does.
//
// The shrink never uses NCCL_SHRINK_ABORT. That flag is for shrinking after an error; it aborts
// the parent on the way, and from NCCL 2.31 a survivor that then frees the parent with
// ncclCommDestroy waits forever in the destroy's intra-node barrier for the excluded ranks, which
// aborted and never come (pytorch issue 194679). Here a shrink is planned, there is no error and
// no operation in flight (every collective is synchronized before it returns), and every rank
// releases the parent the same way: the survivors with ncclCommDestroy after their shrink, the
// leavers with ncclCommDestroy in their Shrink call, so the barrier sees every rank of the node.
// After a collective error the communicator is aborted (Finish) and the job stops; a later
// shrink or grow of an aborted communicator starts a new one from a fresh unique id.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "backend_grow.h"
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

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
#define ELASTIC_NCCL_SHRINK_IN_PLACE 1
#else
#define ELASTIC_NCCL_SHRINK_IN_PLACE 0
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
#define ELASTIC_NCCL_GROW_IN_PLACE 1
#else
#define ELASTIC_NCCL_GROW_IN_PLACE 0
#endif

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

  Status Shrink(MPI_Comm world, std::span<const int> leaving) override {
    if (world == MPI_COMM_NULL) {  // this rank left: release the parent as the survivors do
      Destroy(/*abort=*/false);
      return Status::Ok();
    }
#if ELASTIC_NCCL_SHRINK_IN_PLACE
    if (comm_ != nullptr) {
      ELASTIC_CUDA_CHECK(cudaSetDevice(device_));
      std::vector<int> excluded(leaving.begin(), leaving.end());
      ncclComm_t shrunk = nullptr;
      ELASTIC_NCCL_CHECK(ncclCommShrink(comm_, excluded.data(), static_cast<int>(excluded.size()), &shrunk,
                                        nullptr, NCCL_SHRINK_DEFAULT));
      Destroy(/*abort=*/false);
      comm_ = shrunk;
      return Status::Ok();
    }
#else
    (void)leaving;
#endif
    Destroy(/*abort=*/false);
    return BindFresh(world);
  }

  Status Grow(MPI_Comm world, int newcomers) override {
    (void)newcomers;  // the newcomers are world's last ranks: NCCL numbers them alike
    detail::GrowTerms terms{BackendKind::kNccl, false};
    if (Status s = detail::AgreeOnGrow(world, &terms, true); !s.ok()) return s;
#if ELASTIC_NCCL_GROW_IN_PLACE
    if (comm_ != nullptr) return GrowInPlace(world, /*newcomer=*/false);
#endif
    Destroy(/*abort=*/false);
    return BindFresh(world);
  }

  // The newcomers' side of Grow, after the agreement: the same calls as the old ranks'.
  Status JoinGrow(MPI_Comm world) {
#if ELASTIC_NCCL_GROW_IN_PLACE
    return GrowInPlace(world, /*newcomer=*/true);
#else
    return BindFresh(world);
#endif
  }

  // Collective over world: a new communicator from a fresh unique id (rank 0 makes it).
  Status BindFresh(MPI_Comm world) {
    int rank = 0;
    int size = 0;
    ncclUniqueId id{};
    if (Status s = ShareId(world, /*for_grow=*/false, &rank, &size, &id); !s.ok()) return s;
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

#if ELASTIC_NCCL_GROW_IN_PLACE
  // Collective over world: rank 0 (an old rank) asks its communicator for the grow's unique id and
  // broadcasts it; old ranks keep their numbers (rank -1), newcomers take theirs from world.
  Status GrowInPlace(MPI_Comm world, bool newcomer) {
    int rank = 0;
    int size = 0;
    ncclUniqueId id{};
    if (Status s = ShareId(world, /*for_grow=*/true, &rank, &size, &id); !s.ok()) return s;
    ncclComm_t grown = nullptr;
    const bool pass_id = newcomer || rank == 0;
    ELASTIC_NCCL_CHECK(ncclCommGrow(newcomer ? nullptr : comm_, size, pass_id ? &id : nullptr,
                                    newcomer ? rank : -1, &grown, nullptr));
    Destroy(/*abort=*/false);  // the parent, on the old ranks (NCCL's documented order)
    comm_ = grown;
    return Status::Ok();
  }
#endif

  // Collective over world: this rank's number and the world's size, the device made current, and
  // the unique id rank 0 makes (from its communicator for a grow, afresh otherwise) on every rank.
  Status ShareId(MPI_Comm world, bool for_grow, int* rank, int* size, ncclUniqueId* id) {
    ELASTIC_MPI_CHECK(MPI_Comm_rank(world, rank));
    ELASTIC_MPI_CHECK(MPI_Comm_size(world, size));
    if (Status s = UseDevice(); !s.ok()) return s;
    if (*rank == 0) ELASTIC_NCCL_CHECK(for_grow ? GrowUniqueId(id) : ncclGetUniqueId(id));
    ELASTIC_MPI_CHECK(MPI_Bcast(id, sizeof *id, MPI_BYTE, 0, world));
    return Status::Ok();
  }
  ncclResult_t GrowUniqueId(ncclUniqueId* id) {
#if ELASTIC_NCCL_GROW_IN_PLACE
    return ncclCommGetUniqueId(comm_, id);
#else
    (void)id;
    return ncclInvalidUsage;  // never asked for: without ncclCommGrow a grow starts afresh
#endif
  }

  Status UseDevice() {
    ELASTIC_CUDA_CHECK(cudaSetDevice(device_));
    if (stream_ == nullptr) ELASTIC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
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

namespace detail {

Result<std::unique_ptr<CollectiveBackend>> MakeNcclBackend(MPI_Comm world, int device) {
  auto backend = std::make_unique<NcclBackend>(device);
  if (Status s = backend->BindFresh(world); !s.ok()) return s;
  Log(LogLevel::kInfo, "elastic_mpi", "NCCL backend on CUDA device ", device);
  return std::unique_ptr<CollectiveBackend>(std::move(backend));
}

Result<std::unique_ptr<CollectiveBackend>> JoinNcclGrow(MPI_Comm world, int device) {
  auto backend = std::make_unique<NcclBackend>(device);
  if (Status s = backend->JoinGrow(world); !s.ok()) return s;
  Log(LogLevel::kInfo, "elastic_mpi", "NCCL backend on CUDA device ", device, " (joined a grow)");
  return std::unique_ptr<CollectiveBackend>(std::move(backend));
}

}  // namespace detail

}  // namespace elastic::mpi
