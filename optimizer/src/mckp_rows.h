// What the single-type MCKP solvers (mckp.cpp) share with the several-types solver
// (mckp_multitype.cpp): the pruned candidate rows of one GPU type and the solve over them.
// Internal to optimizer/; mckp.h is the interface.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "elastic/optimizer/mckp.h"

namespace elastic::optimizer::mckp_internal {

using Clock = std::chrono::steady_clock;

inline double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A candidate of one job on one type after pruning: strictly more GPUs buy strictly more value.
struct Cand {
  int64_t gpus;
  double value;
  int32_t orig;  // index of the item within its job (MckpSolution::choice)
};

// The candidates of a subset of jobs on one GPU type, in compressed rows sorted by gpus.
struct Rows {
  std::vector<uint32_t> begin{0};
  std::vector<Cand> cands;
  std::vector<uint32_t> job;  // original job index of each row

  size_t size() const noexcept { return job.size(); }
  const Cand* row_begin(size_t r) const noexcept { return cands.data() + begin[r]; }
  size_t row_len(size_t r) const noexcept { return begin[r + 1] - begin[r]; }
  int64_t row_max_gpus(size_t r) const noexcept { return cands[begin[r + 1] - 1].gpus; }
};

// The rows of type `type` (capacity `cap`) of the jobs in `subset` (all jobs when null).
// Pruning keeps an item only if no other item of the job on this type has at most as many
// GPUs and at least as much value; items with value <= 0 (pending is better) or more GPUs
// than the capacity are dropped, and so are jobs with nothing left.
Rows BuildRows(const MckpProblem& p, int32_t type, int64_t cap, const std::vector<uint32_t>* subset);

// Result of a solve over some rows: value and the chosen candidate per row (-1: none).
struct RowsSolution {
  double value = 0.0;
  std::vector<int32_t> pick;  // index into the row's candidates
};

// Solves one type over `rows`: the exact DP when it fits `budget_ms` and the memory cap,
// else LP + core DP. Sets the proven bound, whether the solution is exact, and the method.
RowsSolution SolveRows(const Rows& rows, int64_t cap, const MckpSettings& settings, double budget_ms,
                       double& bound, bool& exact, std::string& method);

// Several GPU types (mckp_multitype.cpp): the exact DP over the types' combined capacities where
// it is small enough (below), else Lagrangian bound, per-type solves, repair.
MckpSolution SolveMultiType(const MckpProblem& p, const MckpSettings& settings, Clock::time_point start);

// The exact DP over every combination of GPUs used per type (mckp_multitype_exact.cpp); nullopt
// when the combinations exceed settings.max_type_states, the memory cap or half the time left.
std::optional<MckpSolution> SolveMultiTypeExactly(const MckpProblem& p, const MckpSettings& settings,
                                                  Clock::time_point start);

}  // namespace elastic::optimizer::mckp_internal
