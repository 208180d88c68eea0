// Collective backends behind one small interface: MPI on host buffers, and NCCL on device
// buffers when the library was built with CUDA + NCCL and the node has a GPU.
//
// Every buffer passed to a collective carries its memory space (an explicit argument, not a
// guess from the pointer: a query costs a driver call per collective and cannot tell pinned or
// managed host memory from what the program means). NCCL is given device memory only: the NCCL
// backend sends host buffers through MPI on the same world, and the MPI backend stages device
// buffers through host memory (Open MPI here is not CUDA-aware). So any buffer works with any
// backend; memory_space() only says where buffers are fast.
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
#include <string>
#include <string_view>

#include "elastic/common/error.h"

namespace elastic::mpi {

enum class BackendKind { kAuto, kMpi, kNccl };
enum class MemorySpace { kHost, kDevice };
std::string_view MemorySpaceName(MemorySpace space) noexcept;  // "host", "device"

std::string_view BackendKindName(BackendKind kind) noexcept;  // "auto", "mpi", "nccl"
Result<BackendKind> ParseBackendKind(std::string_view name);

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual std::string_view name() const noexcept = 0;
  // Where buffers are fast: device memory for NCCL, host memory for MPI.
  virtual MemorySpace memory_space() const noexcept = 0;
  // The CUDA device that device buffers must be on (NCCL's communicator is bound to it); -1 for
  // a backend that takes device buffers from any device (MPI, through a host copy).
  virtual int device() const noexcept { return -1; }

  // Collective over the bound world: in-place sum of count elements at data, which lives in
  // `space` (the same on every rank). The caller owns data; device data must be complete (the
  // work that wrote it synchronized) and is complete again when the call returns.
  // Failure: kUnavailable with the library's message (a peer died, a library error); the
  // communicator is then unusable and the caller should stop (or rebuild after a shrink).
  // kConfig for device memory in a build without CUDA.
  virtual Status AllreduceSum(float* data, std::size_t count, MemorySpace space) = 0;
  virtual Status AllreduceSum(double* data, std::size_t count, MemorySpace space) = 0;
  // Collective: bytes from root's buffer to every rank's buffer (caller owns data), in `space`.
  virtual Status Broadcast(void* data, std::size_t bytes, int root, MemorySpace space) = 0;

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
// Where the memory at p lives, asked of CUDA (cudaPointerGetAttributes): kDevice for device and
// managed memory, kHost for anything else and always in a build without CUDA. For the C API's
// ELASTIC_MEMORY_ANY; the C++ API takes the space explicitly.
MemorySpace QueryMemorySpace(const void* p) noexcept;

// How a backend is made.
struct BackendOptions {
  BackendKind kind = BackendKind::kAuto;
  // >= 0: equal on the ranks of one MPI launch (a mpirun, a spawn call, a joined group); an MPI
  // backend in a world of several launches then reduces hierarchically (within each launch over
  // shared memory, across launches among one leader each). -1: flat.
  int locality_key = -1;
  // Deadline on each NCCL communicator operation that waits for every rank (init, shrink, grow,
  // finalize): the communicator is aborted on expiry and the call fails with kTimeout.
  double nccl_timeout_s = 120;
  // Names how this process numbers the GPUs: ranks of one node with equal text see the same
  // devices under the same numbers (the session uses the Slurm job id and CUDA_VISIBLE_DEVICES:
  // a spawned group shares its parents' numbering; a separately launched job has its own).
  std::string device_numbering;
  // The CUDA device the program's state is on (its first registered device buffer), which the
  // NCCL backend then uses; -1: none, the backend chooses (device_choice in docs/runtime.md).
  int device = -1;
};

// Creates a backend bound to world (collective over world). kAuto picks NCCL when it is compiled
// and CudaDeviceCount() > 0 on every rank, MPI otherwise (saying why in one log line when NCCL
// is compiled but not usable); kNccl without a GPU or without NCCL falls back to MPI with a
// warning. The NCCL backend's device: the lowest device index, as this process's
// CUDA_VISIBLE_DEVICES numbers them, that no other rank of the node numbering the GPUs alike
// (same Slurm job and same CUDA_VISIBLE_DEVICES) already uses; docs/runtime.md ("GPUs").
// The caller owns the returned backend. Failure: the Status of the backend's first collective.
Result<std::unique_ptr<CollectiveBackend>> MakeBackend(MPI_Comm world, const BackendOptions& options);

// The newcomers' side of CollectiveBackend::Grow, collective over the grown world with the old
// ranks' Grow calls: a backend of the kind the old ranks run (rank 0 tells it, whatever kind this
// process was configured with: one world has one backend), bound to world. options.locality_key
// is this launch's key as in MakeBackend (>= 0, one no old launch has): used when the old ranks
// reduce hierarchically, ignored otherwise; options.kind is ignored. The caller owns the backend.
// Failure: as Grow's.
Result<std::unique_ptr<CollectiveBackend>> JoinGrownBackend(MPI_Comm world, int newcomers,
                                                            const BackendOptions& options);

// The MPI backend alone (never fails to construct), bound to world.
std::unique_ptr<CollectiveBackend> MakeMpiBackend(MPI_Comm world);

}  // namespace elastic::mpi
