#include "elastic_mpi/sharding.h"

#include <algorithm>
#include <string>

#include "elastic/common/error.h"

namespace elastic::mpi {

std::uint64_t SplitMix64::Next() noexcept {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t SplitMix64::Below(std::uint64_t bound) noexcept {
  // Rejection sampling: discard the top partial range so that every residue is equally likely.
  const std::uint64_t limit = UINT64_MAX - (UINT64_MAX % bound + 1) % bound;
  std::uint64_t x = Next();
  while (x > limit) x = Next();
  return x % bound;
}

double SplitMix64::Uniform() noexcept {
  return static_cast<double>(Next() >> 11) * 0x1.0p-53;
}

EpochSharder::EpochSharder(std::uint64_t num_samples, std::uint64_t seed)
    : num_samples_(num_samples), seed_(seed) {
  if (num_samples == 0) throw Error(ErrorKind::kInvalidArgument, "EpochSharder: no samples");
}

void EpochSharder::EnsurePermutation(std::uint64_t epoch) {
  if (cached_epoch_ == epoch) return;
  permutation_.resize(num_samples_);
  for (std::uint64_t i = 0; i < num_samples_; ++i) permutation_[i] = i;
  // Fisher-Yates with a generator seeded from (seed, epoch) only.
  SplitMix64 rng(seed_ ^ (0xD1B54A32D192ED03ULL * (epoch + 1)));
  for (std::uint64_t i = num_samples_ - 1; i > 0; --i) {
    std::swap(permutation_[i], permutation_[rng.Below(i + 1)]);
  }
  cached_epoch_ = epoch;
}

std::uint64_t EpochSharder::SampleAt(std::uint64_t epoch, std::uint64_t i) {
  if (i >= num_samples_) {
    throw Error(ErrorKind::kInvalidArgument, "SampleAt: index " + std::to_string(i) +
                                                 " >= num_samples " + std::to_string(num_samples_));
  }
  EnsurePermutation(epoch);
  return permutation_[i];
}

void EpochSharder::SliceOf(std::uint64_t count, int rank, int world_size, std::uint64_t* begin,
                           std::uint64_t* end) noexcept {
  const auto w = static_cast<std::uint64_t>(world_size);
  const auto r = static_cast<std::uint64_t>(rank);
  const std::uint64_t base = count / w;
  const std::uint64_t extra = count % w;
  *begin = r * base + std::min(r, extra);
  *end = *begin + base + (r < extra ? 1 : 0);
}

StepShard EpochSharder::Next(std::uint64_t global_batch, int rank, int world_size) {
  if (global_batch == 0 || world_size <= 0 || rank < 0 || rank >= world_size) {
    throw Error(ErrorKind::kInvalidArgument,
                "EpochSharder::Next: global_batch " + std::to_string(global_batch) + ", rank " +
                    std::to_string(rank) + ", world_size " + std::to_string(world_size));
  }
  if (cursor_.cursor >= num_samples_) {  // defensive: a handed-over cursor at the very end
    ++cursor_.epoch;
    cursor_.cursor = 0;
  }
  StepShard shard;
  shard.epoch = cursor_.epoch;
  shard.global_count = std::min(global_batch, num_samples_ - cursor_.cursor);
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  SliceOf(shard.global_count, rank, world_size, &begin, &end);
  EnsurePermutation(cursor_.epoch);
  shard.samples.assign(permutation_.begin() + static_cast<std::ptrdiff_t>(cursor_.cursor + begin),
                       permutation_.begin() + static_cast<std::ptrdiff_t>(cursor_.cursor + end));
  cursor_.cursor += shard.global_count;
  if (cursor_.cursor >= num_samples_) {
    ++cursor_.epoch;
    cursor_.cursor = 0;
  }
  return shard;
}

}  // namespace elastic::mpi
