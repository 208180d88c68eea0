// Collective backends behind one small interface: MPI on host buffers, and NCCL on device
// buffers when the library was built with CUDA + NCCL and the node has a GPU.
//
// A backend is bound to one world communicator. After every rescale the session calls
// Rebuild() with the new world on every rank (a collective call), so NCCL communicators are
// recreated from a fresh unique id (there is no ncclCommGrow).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
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

  // Collective over the new world: drop the old communicator and bind to world (the caller keeps
  // ownership of world, which must outlive the binding).
  virtual Status Rebuild(MPI_Comm world) = 0;
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

// The MPI backend alone (never fails to construct; world is bound on the first Rebuild or here).
std::unique_ptr<CollectiveBackend> MakeMpiBackend(MPI_Comm world);

}  // namespace elastic::mpi
