// Which GPU a rank of the NCCL backend uses (internal header).
//
// Each rank's device is a number in its own process's CUDA_VISIBLE_DEVICES numbering, and ranks
// on one node number the GPUs differently when they come from different Slurm jobs (an
// extension job has its own CUDA_VISIBLE_DEVICES) but alike when a group was spawned by its
// parents (it inherits their environment). A rank's local rank in the merged world is therefore
// no device number: two jobs' ranks could pick one GPU, a spawned rank its parent's. Instead,
// among the ranks of a node that number alike (BackendOptions::device_numbering), a rank that
// holds no device yet takes the lowest number none of them holds, in world-rank order; a rank
// keeps its device for its life (shrinks and grows never move it). For a fresh launch this is
// the rank's local rank within its own launch.
#pragma once

#include <mpi.h>

#include <string_view>

#include "elastic/common/error.h"

namespace elastic::mpi::detail {

// Collective over world. held: this rank's device (>= 0), or -1 to choose one among devices
// (> 0). When a node has more such ranks than devices, the extra ones share (a warning names
// them; NCCL then refuses two ranks on one device and the backend falls back to MPI).
// Failure: kUnavailable (MPI).
Result<int> ChooseDevice(MPI_Comm world, int held, int devices, std::string_view numbering);

}  // namespace elastic::mpi::detail
