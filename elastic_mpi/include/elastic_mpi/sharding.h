// Deterministic data sharding that stays exactly-once across rescales.
//
// Every epoch e visits a permutation P_e of the sample ids [0, num_samples), computed from
// (seed, e) alone, so every rank (and every newcomer) computes the same order without
// communication. A global cursor counts the samples of the epoch already consumed by the whole
// world. One step with global batch B takes P_e[cursor, cursor + B) (fewer at the end of the
// epoch), splits it into contiguous slices among the world's ranks (sizes differ by at most one),
// and advances the cursor by the full batch. After a rescale the cursor is handed over with the
// rest of the state, and the remaining samples of the epoch are split among the new world: no
// sample is skipped or repeated.
#pragma once

#include <cstdint>
#include <vector>

namespace elastic::mpi {

// The part of the sharder that must be handed over to newcomers (register it as state).
struct ShardCursor {
  std::uint64_t epoch = 0;   // current epoch, from 0
  std::uint64_t cursor = 0;  // samples of this epoch consumed by the whole world
};

// The samples of one step for one rank.
struct StepShard {
  std::uint64_t epoch = 0;              // epoch these samples belong to
  std::uint64_t global_count = 0;       // samples in the whole step (<= global batch)
  std::vector<std::uint64_t> samples;   // this rank's sample ids, in permutation order
};

class EpochSharder {
 public:
  // num_samples > 0; throws elastic::Error(kInvalidArgument) otherwise.
  EpochSharder(std::uint64_t num_samples, std::uint64_t seed);

  // Takes the next step of global_batch samples (global_batch > 0) and returns rank's share of
  // it in a world of world_size ranks (0 <= rank < world_size). Advances the cursor; moves to the
  // next epoch when the current one is exhausted (the last step of an epoch is short).
  // Throws elastic::Error(kInvalidArgument) on bad arguments.
  StepShard Next(std::uint64_t global_batch, int rank, int world_size);

  // The i-th sample of epoch e's permutation (0 <= i < num_samples). O(1) after the epoch's
  // permutation is cached; the cache holds one epoch (num_samples * 8 bytes).
  std::uint64_t SampleAt(std::uint64_t epoch, std::uint64_t i);

  std::uint64_t num_samples() const noexcept { return num_samples_; }
  // The state to hand over; a pointer to it is stable for the sharder's lifetime.
  ShardCursor& cursor() noexcept { return cursor_; }
  const ShardCursor& cursor() const noexcept { return cursor_; }

  // Range [begin, end) of a step's samples that rank owns when count samples are split among
  // world_size ranks: contiguous, sizes differ by at most one, lower ranks get the extra ones.
  static void SliceOf(std::uint64_t count, int rank, int world_size, std::uint64_t* begin,
                      std::uint64_t* end) noexcept;

 private:
  void EnsurePermutation(std::uint64_t epoch);

  std::uint64_t num_samples_;
  std::uint64_t seed_;
  ShardCursor cursor_;
  std::uint64_t cached_epoch_ = UINT64_MAX;
  std::vector<std::uint64_t> permutation_;
};

// SplitMix64: the runtime's portable pseudo-random generator (same sequence on every platform,
// unlike the std:: distributions). Used for permutations and the example's synthetic data.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t Next() noexcept;
  // Uniform integer in [0, bound) without modulo bias (bound > 0).
  std::uint64_t Below(std::uint64_t bound) noexcept;
  // Uniform double in [0, 1) with 53 random bits.
  double Uniform() noexcept;

 private:
  std::uint64_t state_;
};

}  // namespace elastic::mpi
