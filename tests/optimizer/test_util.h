// Helpers shared by the optimizer tests: random MCKP instances and a brute-force oracle.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "elastic/optimizer/mckp.h"

namespace elastic::optimizer::testing {

// Random problem: `jobs` jobs with 1..max_items items each over `types` types.
MckpProblem RandomMckp(std::mt19937_64& rng, int jobs, int max_items, int types, int max_gpus, int64_t capacity);

// Exhaustive optimum (every combination of one item or none per job); small inputs only.
double BruteForce(const MckpProblem& p);

// Empty when the choice is feasible and its value equals `objective`; else what is wrong.
std::string CheckChoice(const MckpProblem& p, const std::vector<int32_t>& choice, double objective);

}  // namespace elastic::optimizer::testing
