// The MPI backend (host buffers), the GPU probe and the backend factory.
#include <algorithm>
#include <vector>
#include <climits>

#include "check.h"
#include "elastic/common/log.h"
#include "elastic_mpi/backend.h"

#if ELASTIC_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace elastic::mpi {

#if ELASTIC_HAVE_NCCL
// Defined in backend_nccl.cpp.
Result<std::unique_ptr<CollectiveBackend>> MakeNcclBackend(MPI_Comm world, int device);
#endif

std::string_view BackendKindName(BackendKind kind) noexcept {
  switch (kind) {
    case BackendKind::kAuto: return "auto";
    case BackendKind::kMpi: return "mpi";
    case BackendKind::kNccl: return "nccl";
  }
  return "auto";
}

Result<BackendKind> ParseBackendKind(std::string_view name) {
  for (BackendKind k : {BackendKind::kAuto, BackendKind::kMpi, BackendKind::kNccl}) {
    if (BackendKindName(k) == name) return k;
  }
  return Status(ErrorKind::kInvalidArgument,
                "unknown backend '" + std::string(name) + "' (expected auto, mpi or nccl)");
}

namespace {

// MPI counts are int: large buffers go in chunks of at most 1 Gi elements.
constexpr std::size_t kMaxChunk = std::size_t{1} << 30;

// Host-buffer collectives over MPI. With a locality key (ranks of one MPI launch share a key), a
// merged world reduces hierarchically: Open MPI 4.1.4's shared-memory BTL (vader) cannot reach
// the ranks of another launch (a spawned or connected group) even on the same host, so every
// pair across groups talks TCP. Reduce within each launch (shared memory), allreduce among one
// leader per launch (TCP), broadcast within each launch: only the leaders cross launches.
class MpiBackend final : public CollectiveBackend {
 public:
  explicit MpiBackend(MPI_Comm world) : world_(world) {}
  ~MpiBackend() override { FreeHierarchy(); }
  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  // Collective over world. Builds the hierarchy when there are several launches and at least
  // one of them has more than one rank; otherwise collectives stay flat.
  Status UseLocality(int key) {
    int size = 0;
    int rank = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_size(world_, &size));
    ELASTIC_MPI_CHECK(MPI_Comm_rank(world_, &rank));
    std::vector<int> keys(static_cast<std::size_t>(size));
    ELASTIC_MPI_CHECK(MPI_Allgather(&key, 1, MPI_INT, keys.data(), 1, MPI_INT, world_));
    std::vector<int> distinct = keys;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    if (distinct.size() < 2 || static_cast<int>(distinct.size()) == size) return Status::Ok();
    ELASTIC_MPI_CHECK(MPI_Comm_split(world_, key, rank, &local_));
    int local_rank = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_rank(local_, &local_rank));
    ELASTIC_MPI_CHECK(MPI_Comm_split(world_, local_rank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders_));
    is_local_root_ = local_rank == 0;
    return Status::Ok();
  }
  std::string_view name() const noexcept override { return "mpi"; }
  MemorySpace memory_space() const noexcept override { return MemorySpace::kHost; }

  Status AllreduceSum(float* data, std::size_t count) override {
    return Allreduce(data, count, MPI_FLOAT);
  }
  Status AllreduceSum(double* data, std::size_t count) override {
    return Allreduce(data, count, MPI_DOUBLE);
  }
  Status Broadcast(void* data, std::size_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    for (std::size_t done = 0; done < bytes;) {
      const std::size_t n = std::min(kMaxChunk, bytes - done);
      ELASTIC_MPI_CHECK(MPI_Bcast(p + done, static_cast<int>(n), MPI_BYTE, root, world_));
      done += n;
    }
    return Status::Ok();
  }
  Status Rebuild(MPI_Comm world) override {
    FreeHierarchy();
    world_ = world;
    return Status::Ok();
  }

 private:
  template <typename T>
  Status Allreduce(T* data, std::size_t count, MPI_Datatype type) {
    for (std::size_t done = 0; done < count;) {
      const std::size_t n = std::min(kMaxChunk, count - done);
      T* p = data + done;
      const int c = static_cast<int>(n);
      if (local_ == MPI_COMM_NULL) {
        ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p, c, type, MPI_SUM, world_));
      } else {
        if (is_local_root_) {
          ELASTIC_MPI_CHECK(MPI_Reduce(MPI_IN_PLACE, p, c, type, MPI_SUM, 0, local_));
          ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p, c, type, MPI_SUM, leaders_));
        } else {
          ELASTIC_MPI_CHECK(MPI_Reduce(p, nullptr, c, type, MPI_SUM, 0, local_));
        }
        ELASTIC_MPI_CHECK(MPI_Bcast(p, c, type, 0, local_));
      }
      done += n;
    }
    return Status::Ok();
  }
  void FreeHierarchy() {
    if (local_ != MPI_COMM_NULL) MPI_Comm_free(&local_);
    if (leaders_ != MPI_COMM_NULL) MPI_Comm_free(&leaders_);
    is_local_root_ = false;
  }
  MPI_Comm world_;
  MPI_Comm local_ = MPI_COMM_NULL;    // ranks of this rank's launch
  MPI_Comm leaders_ = MPI_COMM_NULL;  // rank 0 of every launch (only on those ranks)
  bool is_local_root_ = false;
};

}  // namespace

int CudaDeviceCount() noexcept {
#if ELASTIC_HAVE_NCCL
  int count = 0;  // cudaGetDeviceCount leaves it untouched on error 35 (no driver)
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error state
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

bool NcclCompiled() noexcept { return ELASTIC_HAVE_NCCL != 0; }

std::unique_ptr<CollectiveBackend> MakeMpiBackend(MPI_Comm world) {
  return std::make_unique<MpiBackend>(world);
}

Result<std::unique_ptr<CollectiveBackend>> MakeBackend(BackendKind kind, MPI_Comm world, int local_rank,
                                                       int locality_key) {
  auto made = MakeBackend(kind, world, local_rank);
  if (!made.ok() || locality_key < 0) return made;
  if (auto* mpi = dynamic_cast<MpiBackend*>(made.value().get())) {
    if (Status s = mpi->UseLocality(locality_key); !s.ok()) return s;
  }
  return made;
}

Result<std::unique_ptr<CollectiveBackend>> MakeBackend(BackendKind kind, MPI_Comm world,
                                                       int local_rank) {
  if (kind == BackendKind::kMpi) return MakeMpiBackend(world);
  // Every rank must choose the same backend: NCCL only when all ranks see a GPU.
  const int devices = CudaDeviceCount();
  int min_devices = devices;
  ELASTIC_MPI_CHECK(MPI_Allreduce(&devices, &min_devices, 1, MPI_INT, MPI_MIN, world));
  const bool nccl_possible = NcclCompiled() && min_devices > 0;
  if (kind == BackendKind::kNccl && !nccl_possible) {
    Log(LogLevel::kWarning, "elastic_mpi", "NCCL backend requested but ",
        NcclCompiled() ? "no GPU is visible on every rank" : "NCCL is not compiled in",
        ": using MPI collectives");
  }
#if ELASTIC_HAVE_NCCL
  if (nccl_possible) return MakeNcclBackend(world, local_rank % devices);
#else
  (void)local_rank;
#endif
  return MakeMpiBackend(world);
}

}  // namespace elastic::mpi
