// The genetic search shared by the evolutionary and pollux policies.
#pragma once

#include <cstddef>
#include <cstdint>

#include "search.h"

namespace elastic::optimizer::internal {

// Genetic search over choice vectors. Each generation: uniform crossover of two random
// parents (probability `crossover`), mutation of a few jobs to a neighbouring option
// (probability `mutation` per child), repair of over-used types by shrinking random jobs,
// greedy refill; the `population` best survive. Seeded with the greedy plan, so it is never
// worse than greedy. Stops after `generations` or the time budget.
struct GaParams {
  size_t population;
  int generations;
  double crossover;
  double mutation;
};

void Genetic(State& st, const GaParams& ga, uint64_t seed, double budget_ms, Clock::time_point start);

}  // namespace elastic::optimizer::internal
