// The multiple-choice knapsack problem (MCKP) at the heart of the `dp` policy.
//
// Each job picks at most one of its items (GPU type, GPU count, value) or nothing (value 0);
// the GPUs used per type must fit that type's capacity; the total value is maximised.
//
//  - One GPU type: an exact dynamic program over capacity, O(sum_j k_j * C) time with k_j the
//    job's non-dominated items, one byte per (job, capacity) cell to reconstruct the choice.
//    When the table would not fit the time budget or memory cap, the LP relaxation (solved
//    exactly by the incremental-efficiency greedy over each job's upper convex hull) gives a
//    bound, and an integer plan is built from the LP solution plus an exact DP over the "core"
//    of jobs whose hull segments lie around the LP's break efficiency.
//  - Several GPU types, few combinations of GPUs used per type (at most
//    MckpSettings::max_type_states): one exact DP over those combinations.
//  - Several GPU types otherwise: Lagrangian relaxation of the per-type capacities (a certified bound for
//    any multipliers, minimised by damped Newton steps on the per-type demand, with coordinate
//    descent where those stall), jobs assigned to the type that is best at the multipliers, an
//    exact DP (or LP + core DP) per type, then a fill pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace elastic::optimizer {

struct MckpItem {
  int32_t type = 0;  // index into MckpProblem::capacity
  int32_t gpus = 0;  // >= 1
  double value = 0.0;
};

// Items in compressed rows: job j owns items[job_begin[j] .. job_begin[j+1]).
struct MckpProblem {
  std::vector<int64_t> capacity;  // per GPU type, >= 0
  std::vector<uint32_t> job_begin{0};
  std::vector<MckpItem> items;

  size_t num_jobs() const noexcept { return job_begin.size() - 1; }
  // Appends one job with the given items.
  void AddJob(const std::vector<MckpItem>& job_items);
};

struct MckpSettings {
  double time_budget_ms = 1000.0;  // wall-clock budget; decides exact DP versus LP + core DP
  // Memory cap for the DP's choice table (one byte per job and capacity unit).
  size_t max_table_bytes = size_t{256} << 20;
  // Assumed cost of one DP cell-item update, used to predict the DP's time against the budget.
  double ns_per_cell = 1.0;
  // Jobs in the core DP of the LP-based method (around the LP break point).
  size_t core_jobs = 400;
  bool force_exact = false;  // single type: always run the exact DP (tests, oracles)
  // Several types: one exact DP over every combination of GPUs used per type when there are at
  // most this many combinations (and it fits the memory cap and half the time budget); above it,
  // or with 0, the Lagrangian method.
  size_t max_type_states = size_t{1} << 21;
};

struct MckpSolution {
  std::vector<int32_t> choice;  // per job: index into the job's items (0-based), or -1
  double objective = 0.0;
  double bound = 0.0;  // proven upper bound on the optimum
  bool exact = false;  // objective is proven optimal
  std::string method;
  double solve_ms = 0.0;
};

// Solves the problem within the settings. Items with value <= 0 or more GPUs than their
// type's capacity are never chosen. Throws elastic::Error(kInvalidArgument) for malformed
// input (type out of range, gpus < 1, non-finite value).
MckpSolution SolveMckp(const MckpProblem& problem, const MckpSettings& settings = {});

// The LP relaxation's optimum for one type (the bound used above), exposed for tests.
double MckpLpBound(const MckpProblem& problem);

}  // namespace elastic::optimizer
