// The guarded backend: the inner backend's collectives, each under the collective guard.
#include "backend_guarded.h"

namespace elastic::mpi {

Status GuardedBackend::AllreduceSum(float* data, std::size_t count, MemorySpace space) {
  detail::GuardScope scope(guard_, "an allreduce of the training step", *step_);
  return inner_->AllreduceSum(data, count, space);
}
Status GuardedBackend::AllreduceSum(double* data, std::size_t count, MemorySpace space) {
  detail::GuardScope scope(guard_, "an allreduce of the training step", *step_);
  return inner_->AllreduceSum(data, count, space);
}
Status GuardedBackend::Broadcast(void* data, std::size_t bytes, int root, MemorySpace space) {
  detail::GuardScope scope(guard_, "a broadcast of the training step", *step_);
  return inner_->Broadcast(data, bytes, root, space);
}
Status GuardedBackend::Shrink(MPI_Comm world, std::span<const int> leaving) { return inner_->Shrink(world, leaving); }
Status GuardedBackend::Grow(MPI_Comm world, int newcomers) { return inner_->Grow(world, newcomers); }

}  // namespace elastic::mpi
