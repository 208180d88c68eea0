// The MPI backend (host buffers), the GPU probe, the backend factory and the agreement that
// starts every grow.
#include <algorithm>
#include <array>
#include <vector>
#include <climits>

#include "backend_grow.h"
#include "check.h"
#include "elastic/common/log.h"
#include "elastic_mpi/backend.h"

#if ELASTIC_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace elastic::mpi {

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
//
// In place: a shrink or grow rebinds to the new world. With a locality key, a launch that neither
// lost nor gained ranks keeps its node-local communicator (the launches that leave or join are
// other launches: groups join and leave whole); the leaders' communicator is split anew, and the
// launches that changed (the newcomers) split theirs. Without one there is nothing else to keep.
class MpiBackend final : public CollectiveBackend {
 public:
  explicit MpiBackend(MPI_Comm world) : world_(world) {}
  ~MpiBackend() override { FreeHierarchy(); }
  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  // Collective over world. Builds the hierarchy when there are several launches and at least
  // one of them has more than one rank; otherwise collectives stay flat (and are re-examined at
  // every shrink and grow).
  Status UseLocality(int key) {
    key_ = key;
    if (Status s = GatherKeys(); !s.ok()) return s;
    return Arrange(/*keep_local=*/false);
  }
  bool hierarchical() const noexcept { return key_ >= 0; }
  void SetKey(int key) noexcept { key_ = key; }

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

  Status Shrink(MPI_Comm world, std::span<const int> leaving) override {
    if (world == MPI_COMM_NULL) {  // this rank left
      FreeHierarchy();
      world_ = MPI_COMM_NULL;
      return Status::Ok();
    }
    world_ = world;
    if (!hierarchical()) return Status::Ok();
    // The survivors' keys, in their (unchanged) order; a launch that lost a rank splits anew.
    bool keep = true;
    std::vector<int> kept;
    for (std::size_t r = 0; r < keys_.size(); ++r) {
      if (std::find(leaving.begin(), leaving.end(), static_cast<int>(r)) == leaving.end()) {
        kept.push_back(keys_[r]);
      } else if (keys_[r] == key_) {
        keep = false;
      }
    }
    keys_ = std::move(kept);
    return Arrange(keep);
  }

  Status Grow(MPI_Comm world, int newcomers) override {
    detail::GrowTerms terms{BackendKind::kMpi, hierarchical()};
    if (Status s = detail::AgreeOnGrow(world, &terms, true); !s.ok()) return s;
    return Joined(world, newcomers);
  }

  // Both sides of a grow after the agreement: rebind; with locality, learn the newcomers' keys
  // and keep this launch's communicator unless a newcomer shares its key.
  Status Joined(MPI_Comm world, int newcomers) {
    world_ = world;
    if (!hierarchical()) return Status::Ok();
    if (Status s = GatherKeys(); !s.ok()) return s;
    const std::size_t first_new = keys_.size() - static_cast<std::size_t>(newcomers);
    const bool keep = std::find(keys_.begin() + static_cast<std::ptrdiff_t>(first_new), keys_.end(), key_) == keys_.end();
    return Arrange(keep);
  }

 private:
  template <typename T>
  Status Allreduce(T* data, std::size_t count, MPI_Datatype type) {
    for (std::size_t done = 0; done < count;) {
      const std::size_t n = std::min(kMaxChunk, count - done);
      T* p = data + done;
      const int c = static_cast<int>(n);
      if (!by_launch_) {
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

  // Collective over world_: every rank's locality key, by world rank.
  Status GatherKeys() {
    int size = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_size(world_, &size));
    keys_.assign(static_cast<std::size_t>(size), 0);
    ELASTIC_MPI_CHECK(MPI_Allgather(&key_, 1, MPI_INT, keys_.data(), 1, MPI_INT, world_));
    return Status::Ok();
  }

  // Collective over world_, from keys_ (the same on every rank, so every rank decides alike):
  // hierarchical when there are several launches and one has more than one rank, flat
  // otherwise. The launch's communicator exists either way (a world of one launch keeps it for
  // its next grow). keep_local: this rank's launch is unchanged, its communicator stays (it takes
  // part in the split with MPI_UNDEFINED, which the split needs from every rank).
  Status Arrange(bool keep_local) {
    int rank = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_rank(world_, &rank));
    keep_local = keep_local && local_ != MPI_COMM_NULL;
    if (!keep_local && local_ != MPI_COMM_NULL) MPI_Comm_free(&local_);
    MPI_Comm split = MPI_COMM_NULL;
    ELASTIC_MPI_CHECK(MPI_Comm_split(world_, keep_local ? MPI_UNDEFINED : key_, rank, &split));
    if (!keep_local) local_ = split;
    Log(LogLevel::kDebug, "elastic_mpi", "rank ", rank, keep_local ? " kept" : " split", " its launch's communicator");
    int local_rank = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_rank(local_, &local_rank));
    is_local_root_ = local_rank == 0;
    if (leaders_ != MPI_COMM_NULL) MPI_Comm_free(&leaders_);
    std::vector<int> distinct = keys_;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    by_launch_ = distinct.size() >= 2 && distinct.size() < keys_.size();
    if (by_launch_) {
      ELASTIC_MPI_CHECK(MPI_Comm_split(world_, is_local_root_ ? 0 : MPI_UNDEFINED, rank, &leaders_));
    }
    return Status::Ok();
  }

  void FreeHierarchy() {
    if (local_ != MPI_COMM_NULL) MPI_Comm_free(&local_);
    if (leaders_ != MPI_COMM_NULL) MPI_Comm_free(&leaders_);
    is_local_root_ = false;
    by_launch_ = false;
  }
  MPI_Comm world_;
  int key_ = -1;                      // this rank's locality key; -1: flat, no locality
  std::vector<int> keys_;             // every rank's key, by world rank (with a key only)
  MPI_Comm local_ = MPI_COMM_NULL;    // ranks of this rank's launch
  MPI_Comm leaders_ = MPI_COMM_NULL;  // rank 0 of every launch (only on those ranks)
  bool is_local_root_ = false;
  bool by_launch_ = false;            // reduce within launches, then among their leaders
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
  if (nccl_possible) return detail::MakeNcclBackend(world, local_rank % devices);
#else
  (void)local_rank;
#endif
  return MakeMpiBackend(world);
}

namespace detail {

Status AgreeOnGrow(MPI_Comm world, GrowTerms* terms, bool able) {
  std::array<int, 2> told{static_cast<int>(terms->kind), terms->hierarchical ? 1 : 0};
  ELASTIC_MPI_CHECK(MPI_Bcast(told.data(), 2, MPI_INT, 0, world));
  terms->kind = told[0] == static_cast<int>(BackendKind::kNccl) ? BackendKind::kNccl : BackendKind::kMpi;
  terms->hierarchical = told[1] != 0;
  if (terms->kind == BackendKind::kNccl) able = able && NcclCompiled() && CudaDeviceCount() > 0;
  int all_able = able ? 1 : 0;
  ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all_able, 1, MPI_INT, MPI_MIN, world));
  if (all_able == 0) {
    // The world's buffers live where its backend wants them (device memory for NCCL): a newcomer
    // cannot switch the world to host collectives under the program's feet.
    return Status(ErrorKind::kConfig, "the world runs the " + std::string(BackendKindName(terms->kind)) +
                                          " backend but a joining rank cannot (no GPU or no NCCL there)");
  }
  return Status::Ok();
}

}  // namespace detail

Result<std::unique_ptr<CollectiveBackend>> JoinGrownBackend(MPI_Comm world, int newcomers, int local_rank,
                                                            int locality_key) {
  detail::GrowTerms terms;  // rank 0 (an old rank) overwrites it
  if (Status s = detail::AgreeOnGrow(world, &terms, true); !s.ok()) return s;
#if ELASTIC_HAVE_NCCL
  if (terms.kind == BackendKind::kNccl) return detail::JoinNcclGrow(world, local_rank % CudaDeviceCount());
#else
  (void)local_rank;
#endif
  auto backend = std::make_unique<MpiBackend>(world);
  // The old ranks reduce by launch: so does this launch, under its own key (one no old launch
  // has: see the header).
  if (terms.hierarchical) backend->SetKey(locality_key < 0 ? INT_MAX : locality_key);
  if (Status s = backend->Joined(world, newcomers); !s.ok()) return s;
  return std::unique_ptr<CollectiveBackend>(std::move(backend));
}

}  // namespace elastic::mpi
