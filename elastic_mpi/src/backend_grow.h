// What the backends share for growing in place: the agreement at the start of every grow, and the
// NCCL backend's factories (defined in backend_nccl.cpp, compiled only with CUDA + NCCL).
#pragma once

#include <mpi.h>

#include <memory>

#include "elastic_mpi/backend.h"

namespace elastic::mpi::detail {

// What the old ranks run, told to the newcomers at the start of a grow.
struct GrowTerms {
  BackendKind kind = BackendKind::kMpi;  // never kAuto
  bool hierarchical = false;             // the MPI backend reduces by launch (a locality key)
};

// Collective over the grown world, first step of Grow on every rank: rank 0 (an old rank)
// broadcasts *terms (the newcomers' copy is overwritten), then every rank says whether it can run
// that kind (able: the old ranks pass true). kConfig on every rank when one cannot,
// kUnavailable on an MPI error.
Status AgreeOnGrow(MPI_Comm world, GrowTerms* terms, bool able);

#if ELASTIC_HAVE_NCCL
// A NCCL backend on a device chosen among `devices` (device_choice.h), bound to world from a
// fresh unique id (collective). kConfig on every rank when the set-up failed on one (NCCL not
// usable: the caller falls back to MPI); kUnavailable on an MPI error.
Result<std::unique_ptr<CollectiveBackend>> MakeNcclBackend(MPI_Comm world, int devices, const BackendOptions& options);
// The newcomers' side of the NCCL backend's Grow, after AgreeOnGrow (collective over world).
Result<std::unique_ptr<CollectiveBackend>> JoinNcclGrow(MPI_Comm world, const BackendOptions& options);
#endif

}  // namespace elastic::mpi::detail
