// The backend the program gets (internal header): every collective of an inner backend (MPI or
// NCCL) under the session's collective guard, so a dead peer stops the job with a clear error
// instead of a silent hang.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "elastic_mpi/backend.h"
#include "watchdog.h"

namespace elastic::mpi {

class GuardedBackend final : public CollectiveBackend {
 public:
  // guard and step (the session's step counter, named in the guard's message) outlive the backend.
  GuardedBackend(std::unique_ptr<CollectiveBackend> inner, detail::CollectiveGuard* guard, const std::uint64_t* step)
      : inner_(std::move(inner)), guard_(guard), step_(step) {}
  std::string_view name() const noexcept override { return inner_->name(); }
  MemorySpace memory_space() const noexcept override { return inner_->memory_space(); }
  int device() const noexcept override { return inner_->device(); }
  Status AllreduceSum(float* data, std::size_t count, MemorySpace space) override;
  Status AllreduceSum(double* data, std::size_t count, MemorySpace space) override;
  Status Broadcast(void* data, std::size_t bytes, int root, MemorySpace space) override;
  Status Shrink(MPI_Comm world, std::span<const int> leaving) override;
  Status Grow(MPI_Comm world, int newcomers) override;

 private:
  std::unique_ptr<CollectiveBackend> inner_;
  detail::CollectiveGuard* guard_;
  const std::uint64_t* step_;
};

}  // namespace elastic::mpi
