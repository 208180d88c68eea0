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
//
// Every communicator is non-blocking (ncclConfig_t blocking = 0): init, shrink, grow and
// finalize return at once and are polled (ncclCommGetAsyncError) until done or until the
// deadline (BackendOptions::nccl_timeout_s), when the communicator is aborted and the call fails
// with kTimeout, so a rank that never arrives cannot hang the others. A communicator is
// destroyed (finalize, then destroy) when it is let go after success, and aborted (ncclCommAbort)
// after any failure. Host buffers never reach NCCL: they go through MPI on the same world. The
// backend owns one CUDA stream for its life, destroyed with it.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "backend_grow.h"
#include "check.h"
#include "device_choice.h"
#include "elastic/common/log.h"
#include "elastic_mpi/backend.h"
#include "host_collectives.h"

#define ELASTIC_CUDA_CHECK(call)                                                              \
  do {                                                                                        \
    const cudaError_t elastic_crc_ = (call);                                                  \
    if (elastic_crc_ != cudaSuccess) {                                                        \
      (void)cudaGetLastError();                                                               \
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

using Clock = std::chrono::steady_clock;

// "what failed: <NCCL's error string> (<NCCL's last message>)".
Status NcclStatus(const std::string& what, ncclResult_t rc, ncclComm_t comm) {
  std::string text = what + " failed: " + ncclGetErrorString(rc);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') text += std::string(" (") + last + ")";
  return Status(ErrorKind::kUnavailable, text);
}

// The configuration of every communicator of the backend: non-blocking.
ncclConfig_t NonBlocking() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// Waits for the operation `what` issued on comm (it returned `issued`) to finish: polls the
// communicator's state. timeout_s > 0: kTimeout after that long; 0: no deadline of its own (the
// collectives, under the session's collective guard). The caller aborts comm on failure.
Status Await(ncclComm_t comm, ncclResult_t issued, const std::string& what, double timeout_s) {
  if (issued != ncclSuccess && issued != ncclInProgress) return NcclStatus(what, issued, comm);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  auto pause = std::chrono::microseconds(10);
  for (;;) {
    ncclResult_t state = ncclInProgress;
    if (const ncclResult_t rc = ncclCommGetAsyncError(comm, &state); rc != ncclSuccess) {
      return NcclStatus("ncclCommGetAsyncError after " + what, rc, comm);
    }
    if (state == ncclSuccess) return Status::Ok();
    if (state != ncclInProgress) return NcclStatus(what, state, comm);
    if (timeout_s > 0 && Clock::now() >= deadline) {
      return Status(ErrorKind::kTimeout, what + " did not complete within " + std::to_string(timeout_s) +
                                             " s (ELASTIC_NCCL_TIMEOUT_S): a rank did not take part");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

class NcclBackend final : public CollectiveBackend {
 public:
  NcclBackend(int device, const BackendOptions& options) : device_(device), options_(options) {}
  ~NcclBackend() override {
    Release();
    if (stream_ != nullptr) {
      (void)cudaSetDevice(device_);
      (void)cudaStreamDestroy(stream_);
    }
  }
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  std::string_view name() const noexcept override { return "nccl"; }
  MemorySpace memory_space() const noexcept override { return MemorySpace::kDevice; }
  int device() const noexcept override { return device_; }

  Status AllreduceSum(float* data, std::size_t count, MemorySpace space) override {
    if (space == MemorySpace::kHost) return detail::HostAllreduce(data, count, MPI_FLOAT, world_);
    return Finish(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
  }
  Status AllreduceSum(double* data, std::size_t count, MemorySpace space) override {
    if (space == MemorySpace::kHost) return detail::HostAllreduce(data, count, MPI_DOUBLE, world_);
    return Finish(ncclAllReduce(data, data, count, ncclFloat64, ncclSum, comm_, stream_), "ncclAllReduce");
  }
  Status Broadcast(void* data, std::size_t bytes, int root, MemorySpace space) override {
    if (space == MemorySpace::kHost) return detail::HostBroadcast(data, bytes, root, world_);
    return Finish(ncclBroadcast(data, data, bytes, ncclChar, root, comm_, stream_), "ncclBroadcast");
  }

  Status Shrink(MPI_Comm world, std::span<const int> leaving) override {
    world_ = world;
    if (world == MPI_COMM_NULL) {  // this rank left: release the parent as the survivors do
      Release();
      return Status::Ok();
    }
#if ELASTIC_NCCL_SHRINK_IN_PLACE
    if (comm_ != nullptr) {
      ELASTIC_CUDA_CHECK(cudaSetDevice(device_));
      std::vector<int> excluded(leaving.begin(), leaving.end());
      ncclComm_t shrunk = nullptr;
      ncclConfig_t config = NonBlocking();
      const ncclResult_t issued = ncclCommShrink(comm_, excluded.data(), static_cast<int>(excluded.size()), &shrunk,
                                                 &config, NCCL_SHRINK_DEFAULT);
      if (Status s = Settle(shrunk, issued, "ncclCommShrink"); !s.ok()) return Fail(s);
      Release();
      comm_ = shrunk;
      return Status::Ok();
    }
#else
    (void)leaving;
#endif
    Release();
    return BindFresh(world);
  }

  Status Grow(MPI_Comm world, int newcomers) override {
    (void)newcomers;  // the newcomers are world's last ranks: NCCL numbers them alike
    detail::GrowTerms terms{BackendKind::kNccl, false};
    if (Status s = detail::AgreeOnGrow(world, &terms, true); !s.ok()) return s;
    // The newcomers choose their devices around the ones the old ranks hold.
    if (auto d = detail::ChooseDevice(world, device_, CudaDeviceCount(), options_.device_numbering); !d.ok()) {
      return d.status();
    }
#if ELASTIC_NCCL_GROW_IN_PLACE
    if (comm_ != nullptr) return GrowInPlace(world, /*newcomer=*/false);
#endif
    Release();
    return BindFresh(world);
  }

  // The newcomers' side of Grow, after the agreement and the device choice: the same calls as
  // the old ranks'.
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
    ncclConfig_t config = NonBlocking();
    ncclComm_t fresh = nullptr;
    const ncclResult_t issued = ncclCommInitRankConfig(&fresh, size, id, rank, &config);
    if (Status s = Settle(fresh, issued, "ncclCommInitRankConfig"); !s.ok()) return s;
    comm_ = fresh;
    return Status::Ok();
  }

 private:
  // Waits for a communicator operation that waits for every rank (init, shrink, grow) under the
  // deadline; aborts the new communicator when it failed.
  Status Settle(ncclComm_t& made, ncclResult_t issued, const char* what) {
    Status s = made == nullptr ? NcclStatus(what, issued == ncclSuccess ? ncclInternalError : issued, nullptr)
                               : Await(made, issued, what, options_.nccl_timeout_s);
    if (!s.ok() && made != nullptr) {
      ncclCommAbort(made);
      made = nullptr;
    }
    return s;
  }

  // After a failure of this backend's communicator: abort it, so no rank blocks in it.
  Status Fail(Status s) {
    Abort();
    return s;
  }

  // Waits for the collective; aborts the communicator on any error.
  Status Finish(ncclResult_t issued, const char* what) {
    if (comm_ == nullptr) return Status(ErrorKind::kUnavailable, std::string(what) + ": the NCCL communicator was aborted");
    if (Status s = Await(comm_, issued, what, 0); !s.ok()) return Fail(s);
    const cudaError_t rc = cudaStreamSynchronize(stream_);
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      return Fail(Status(ErrorKind::kUnavailable, std::string("cudaStreamSynchronize after ") + what +
                                                      " failed: " + cudaGetErrorString(rc)));
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
    ncclConfig_t config = NonBlocking();
    const ncclResult_t issued = ncclCommGrow(newcomer ? nullptr : comm_, size, pass_id ? &id : nullptr,
                                             newcomer ? rank : -1, &grown, &config);
    if (Status s = Settle(grown, issued, "ncclCommGrow"); !s.ok()) return Fail(s);
    Release();  // the parent, on the old ranks (NCCL's documented order)
    comm_ = grown;
    return Status::Ok();
  }
#endif

  // Collective over world: this rank's number and the world's size, the device made current, and
  // the unique id rank 0 makes (from its communicator for a grow, afresh otherwise) on every rank.
  // Rank 0 broadcasts even when making the id failed (a zero id with a flag), so that no rank
  // waits for it.
  Status ShareId(MPI_Comm world, bool for_grow, int* rank, int* size, ncclUniqueId* id) {
    world_ = world;
    ELASTIC_MPI_CHECK(MPI_Comm_rank(world, rank));
    ELASTIC_MPI_CHECK(MPI_Comm_size(world, size));
    Status status = UseDevice();
    ncclResult_t made = ncclSuccess;
    if (*rank == 0 && status.ok()) made = for_grow ? GrowUniqueId(id) : ncclGetUniqueId(id);
    int ok = status.ok() && made == ncclSuccess ? 1 : 0;
    ELASTIC_MPI_CHECK(MPI_Bcast(id, sizeof *id, MPI_BYTE, 0, world));
    ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, world));
    if (!status.ok()) return status;
    if (made != ncclSuccess) return NcclStatus("making the NCCL unique id", made, comm_);
    if (ok == 0) return Status(ErrorKind::kUnavailable, "another rank could not make its CUDA device current or "
                                                        "the NCCL unique id (its log says why)");
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

  // Lets go of the communicator after success: finalize (flushes, under the deadline), destroy;
  // aborts it when the finalize fails or does not complete in time.
  void Release() noexcept {
    if (comm_ == nullptr) return;
    const Status s = Await(comm_, ncclCommFinalize(comm_), "ncclCommFinalize", options_.nccl_timeout_s);
    if (!s.ok()) {
      Log(LogLevel::kWarning, "elastic_mpi", s.message(), ": aborting the NCCL communicator");
      Abort();
      return;
    }
    ncclCommDestroy(comm_);
    comm_ = nullptr;
  }

 public:
  void Abort() noexcept {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  int device_;
  BackendOptions options_;
  MPI_Comm world_ = MPI_COMM_NULL;  // the MPI world the host buffers are reduced over
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// Collective over world, after a set-up on every rank: whether it worked everywhere. A failure
// anywhere is kConfig on every rank (NCCL not usable: the caller falls back to MPI), with this
// rank's own reason when it has one; an MPI error is kUnavailable.
Result<std::unique_ptr<CollectiveBackend>> Agree(MPI_Comm world, std::unique_ptr<NcclBackend> backend, Status set_up) {
  int ok = set_up.ok() ? 1 : 0;
  ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, world));
  if (ok == 0) {
    backend->Abort();  // the other ranks abandon theirs: nothing to finalize together
    return Status(ErrorKind::kConfig, set_up.ok() ? std::string("the NCCL set-up failed on another rank (its log says why)")
                                                  : "the NCCL set-up failed: " + set_up.message());
  }
  return std::unique_ptr<CollectiveBackend>(std::move(backend));
}

}  // namespace

namespace detail {

Result<std::unique_ptr<CollectiveBackend>> MakeNcclBackend(MPI_Comm world, int devices, const BackendOptions& options) {
  auto device = ChooseDevice(world, options.device, devices, options.device_numbering);
  if (!device.ok()) return device.status();
  auto backend = std::make_unique<NcclBackend>(device.value(), options);
  const Status set_up = backend->BindFresh(world);
  if (set_up.ok()) Log(LogLevel::kInfo, "elastic_mpi", "NCCL backend on CUDA device ", device.value());
  if (!set_up.ok()) Log(LogLevel::kWarning, "elastic_mpi", "NCCL set-up on CUDA device ", device.value(), " failed: ", set_up.message());
  return Agree(world, std::move(backend), set_up);
}

Result<std::unique_ptr<CollectiveBackend>> JoinNcclGrow(MPI_Comm world, const BackendOptions& options) {
  auto device = ChooseDevice(world, options.device, CudaDeviceCount(), options.device_numbering);
  if (!device.ok()) return device.status();
  auto backend = std::make_unique<NcclBackend>(device.value(), options);
  if (Status s = backend->JoinGrow(world); !s.ok()) return s;
  Log(LogLevel::kInfo, "elastic_mpi", "NCCL backend on CUDA device ", device.value(), " (joined a grow)");
  return std::unique_ptr<CollectiveBackend>(std::move(backend));
}

}  // namespace detail

}  // namespace elastic::mpi
