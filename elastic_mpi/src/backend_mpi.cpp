// The MPI backend (host buffers; device buffers through a host copy), the host collectives the
// other paths share, the GPU probe, the backend factory and the agreement that starts every grow.
#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <string>
#include <vector>

#include "backend_grow.h"
#include "check.h"
#include "elastic/common/log.h"
#include "elastic_mpi/backend.h"
#include "host_collectives.h"
#include "memory_space.h"

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

}  // namespace

namespace detail {

Status HostAllreduce(void* data, std::size_t count, MPI_Datatype type, MPI_Comm comm) {
  int size = 0;
  ELASTIC_MPI_CHECK(MPI_Type_size(type, &size));
  auto* p = static_cast<char*>(data);
  for (std::size_t done = 0; done < count;) {
    const std::size_t n = std::min(kMaxChunk, count - done);
    ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p + done * static_cast<std::size_t>(size), static_cast<int>(n),
                                    type, MPI_SUM, comm));
    done += n;
  }
  return Status::Ok();
}

Status HostBroadcast(void* data, std::size_t bytes, int root, MPI_Comm comm) {
  auto* p = static_cast<char*>(data);
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(kMaxChunk, bytes - done);
    ELASTIC_MPI_CHECK(MPI_Bcast(p + done, static_cast<int>(n), MPI_BYTE, root, comm));
    done += n;
  }
  return Status::Ok();
}

}  // namespace detail

namespace {

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

  Status AllreduceSum(float* data, std::size_t count, MemorySpace space) override {
    return AllreduceIn(data, count, space, MPI_FLOAT);
  }
  Status AllreduceSum(double* data, std::size_t count, MemorySpace space) override {
    return AllreduceIn(data, count, space, MPI_DOUBLE);
  }
  Status Broadcast(void* data, std::size_t bytes, int root, MemorySpace space) override {
    auto view = detail::HostView::Of(data, bytes, space, /*fill=*/true);
    if (!view.ok()) return view.status();
    if (Status s = detail::HostBroadcast(view.value().data(), bytes, root, world_); !s.ok()) return s;
    return view.value().WriteBack();
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
  // A device buffer is reduced in a host copy (the MPI here is not CUDA-aware).
  template <typename T>
  Status AllreduceIn(T* data, std::size_t count, MemorySpace space, MPI_Datatype type) {
    auto view = detail::HostView::Of(data, count * sizeof(T), space, /*fill=*/true);
    if (!view.ok()) return view.status();
    if (Status s = Allreduce(static_cast<T*>(view.value().data()), count, type); !s.ok()) return s;
    return view.value().WriteBack();
  }

  template <typename T>
  Status Allreduce(T* data, std::size_t count, MPI_Datatype type) {
    if (!by_launch_) return detail::HostAllreduce(data, count, type, world_);
    for (std::size_t done = 0; done < count;) {
      const std::size_t n = std::min(kMaxChunk, count - done);
      T* p = data + done;
      const int c = static_cast<int>(n);
      if (is_local_root_) {
        ELASTIC_MPI_CHECK(MPI_Reduce(MPI_IN_PLACE, p, c, type, MPI_SUM, 0, local_));
        ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p, c, type, MPI_SUM, leaders_));
      } else {
        ELASTIC_MPI_CHECK(MPI_Reduce(p, nullptr, c, type, MPI_SUM, 0, local_));
      }
      ELASTIC_MPI_CHECK(MPI_Bcast(p, c, type, 0, local_));
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

namespace {

// Says, once per process, why the world's collectives run over MPI although NCCL was asked for
// or could have been used: a warning when asked for, information under auto.
void SayWhyMpi(BackendKind asked, MPI_Comm world, const std::string& why) {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  if (rank != 0) return;
  Log(asked == BackendKind::kNccl ? LogLevel::kWarning : LogLevel::kInfo, "elastic_mpi", "NCCL backend ",
      asked == BackendKind::kNccl ? "requested" : "not used", ": ", why, ": using MPI collectives");
}

// Collective over world: whether every rank can run NCCL, and why not (the same text on every rank).
Result<std::string> WhyNotNccl(MPI_Comm world, int devices) {
  std::array<int, 2> counts{devices > 0 ? 0 : 1, 1};  // ranks without a GPU, ranks
  ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, counts.data(), 2, MPI_INT, MPI_SUM, world));
  if (!NcclCompiled()) return std::string("this build has no NCCL (CUDA or NCCL not found at build time)");
  if (counts[0] == 0) return std::string();
  return std::to_string(counts[0]) + " of " + std::to_string(counts[1]) +
         " ranks see no GPU (no driver, or CUDA_VISIBLE_DEVICES empty)";
}

}  // namespace

Result<std::unique_ptr<CollectiveBackend>> MakeBackend(MPI_Comm world, const BackendOptions& options) {
  if (options.kind != BackendKind::kMpi) {
    // Every rank must choose the same backend: NCCL only when all ranks see a GPU.
    const int devices = CudaDeviceCount();
    auto why = WhyNotNccl(world, devices);
    if (!why.ok()) return why.status();
    if (!why.value().empty()) {
      SayWhyMpi(options.kind, world, why.value());
    } else {
#if ELASTIC_HAVE_NCCL
      auto nccl = detail::MakeNcclBackend(world, devices, options);
      if (nccl.ok() || nccl.status().kind() != ErrorKind::kConfig) return nccl;
      SayWhyMpi(options.kind, world, nccl.status().message());  // set-up failed on some rank
#endif
    }
  }
  auto mpi = std::make_unique<MpiBackend>(world);
  if (options.locality_key >= 0) {
    if (Status s = mpi->UseLocality(options.locality_key); !s.ok()) return s;
  }
  return std::unique_ptr<CollectiveBackend>(std::move(mpi));
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

Result<std::unique_ptr<CollectiveBackend>> JoinGrownBackend(MPI_Comm world, int newcomers,
                                                            const BackendOptions& options) {
  detail::GrowTerms terms;  // rank 0 (an old rank) overwrites it
  if (Status s = detail::AgreeOnGrow(world, &terms, true); !s.ok()) return s;
#if ELASTIC_HAVE_NCCL
  if (terms.kind == BackendKind::kNccl) return detail::JoinNcclGrow(world, options);
#endif
  const int locality_key = options.locality_key;
  auto backend = std::make_unique<MpiBackend>(world);
  // The old ranks reduce by launch: so does this launch, under its own key (one no old launch
  // has: see the header).
  if (terms.hierarchical) backend->SetKey(locality_key < 0 ? INT_MAX : locality_key);
  if (Status s = backend->Joined(world, newcomers); !s.ok()) return s;
  return std::unique_ptr<CollectiveBackend>(std::move(backend));
}

}  // namespace elastic::mpi
