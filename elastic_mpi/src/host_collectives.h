// MPI collectives on host buffers over a whole communicator (internal header; defined in
// backend_mpi.cpp): the MPI backend's flat path, the NCCL backend's path for host buffers (NCCL
// is never given host memory), and the state hand-over's broadcasts. MPI counts are int: large
// buffers go in chunks of at most 1 Gi elements. Failure: kUnavailable (MPI error).
#pragma once

#include <mpi.h>

#include <cstddef>

#include "elastic/common/error.h"

namespace elastic::mpi::detail {

// In-place sum over comm of count elements of type at data.
Status HostAllreduce(void* data, std::size_t count, MPI_Datatype type, MPI_Comm comm);
// root's bytes into every rank's buffer; an intercommunicator's roots pass MPI_ROOT/MPI_PROC_NULL.
Status HostBroadcast(void* data, std::size_t bytes, int root, MPI_Comm comm);

}  // namespace elastic::mpi::detail
