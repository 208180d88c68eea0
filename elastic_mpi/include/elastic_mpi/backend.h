// Collective backends behind one small interface: MPI on host buffers, and NCCL on device
// buffers when the library was built with CUDA + NCCL and the node has a GPU.
//
// A backend is bound to one world communicator and follows the world's changes in place: the
// session calls Shrink() when groups leave and Grow() when groups join, instead of recreating the
// backend, so a backend keeps what the change does not touch (NCCL: ncclCommShrink and
// ncclCommGrow where the library has them; MPI: the node-local communicators of the launches
// that stay). docs/runtime.md ("Collective backends") says what each backend does.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "elastic/common/error.h"

namespace elastic::mpi {

enum class BackendKind { kAuto, kMpi, kNccl };
enum class MemorySpace { kHost, kDevice };

std::string_view BackendKindName(BackendKind kind) noexcept;  // "auto", "mpi", "nccl"
Result<BackendKind> ParseBackendKind(std::string_view name);

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual std::string_view name() const noexcept = 0;
  // Where the buffers passed to the collectives must live.
  virtual MemorySpace memory_space() const noexcept = 0;

  // Collective over the bound world: in-place sum of count elements. The caller owns data.
  // Failure: kUnavailable with the library's message (a peer died, a library error); the
  // communicator is then unusable and the caller should stop (or rebuild after a shrink).
  virtual Status AllreduceSum(float* data, std::size_t count) = 0;
  virtual Status AllreduceSum(double* data, std::size_t count) = 0;
  // Collective: bytes from root's buffer to every rank's buffer (caller owns data).
  virtual Status Broadcast(void* data, std::size_t bytes, int root) = 0;

  // Collective over the old world, every rank of it (the leavers too), after it shrank: leaving
  // lists the old world's ranks that left (ascending); the others keep their order in world (the
  // new, smaller world: MPI_Comm_split of the old one). A leaving rank passes MPI_COMM_NULL: its
  // backend lets go of the old world and takes part in no collective afterwards. The caller keeps
  // ownership of world, which must outlive the binding. Failure: kUnavailable (library error).
  virtual Status Shrink(MPI_Comm world, std::span<const int> leaving) = 0;
  // Collective over the grown world: world's last `newcomers` ranks joined, the old ranks keep
  // their numbers (the parents come first in the merge). Called on the old ranks' backends; the
  // newcomers take part through JoinGrownBackend. Failure: kConfig when a newcomer
  // cannot run this backend (NCCL without a GPU), kUnavailable on a library error.
  virtual Status Grow(MPI_Comm world, int newcomers) = 0;
};

// Number of CUDA devices visible to this process; 0 when CUDA is not compiled in, when there is
// no driver (cudaGetDeviceCount returns error 35 on machines without a GPU) or on any error.
int CudaDeviceCount() noexcept;
// True when the NCCL backend was compiled in.
bool NcclCompiled() noexcept;

// Creates a backend bound to world (collective over world). kAuto picks NCCL when it is compiled
// and CudaDeviceCount() > 0 on every rank, MPI otherwise; kNccl without a GPU or without NCCL
// falls back to MPI with a warning. local_rank picks the GPU (local_rank % device count).
// The caller owns the returned backend. Failure: the Status of the backend's first collective.
Result<std::unique_ptr<CollectiveBackend>> MakeBackend(BackendKind kind, MPI_Comm world,
                                                       int local_rank);
// The same; with locality_key >= 0 (equal on the ranks of one MPI launch: a mpirun, a spawn
// call, a joined group) an MPI backend in a world of several launches reduces hierarchically
// (within each launch over shared memory, across launches among one leader each).
Result<std::unique_ptr<CollectiveBackend>> MakeBackend(BackendKind kind, MPI_Comm world, int local_rank,
                                                       int locality_key);

// The newcomers' side of CollectiveBackend::Grow, collective over the grown world with the old
// ranks' Grow calls: a backend of the kind the old ranks run (rank 0 tells it, whatever kind this
// process was configured with: one world has one backend), bound to world. locality_key is this
// launch's key as in MakeBackend (>= 0, one no old launch has): used when the old ranks reduce
// hierarchically, ignored otherwise. The caller owns the backend.
// Failure: as Grow's.
Result<std::unique_ptr<CollectiveBackend>> JoinGrownBackend(MPI_Comm world, int newcomers, int local_rank,
                                                            int locality_key);

// The MPI backend alone (never fails to construct), bound to world.
std::unique_ptr<CollectiveBackend> MakeMpiBackend(MPI_Comm world);

}  // namespace elastic::mpi
