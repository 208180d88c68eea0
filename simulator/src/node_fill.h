// Where a job's GPUs are taken from and where its new GPUs go on the nodes of its type, the same rule for the one-type
// simulator (simulator.cpp) and the several-types one (hetero_sim.cpp).
#pragma once

#include <vector>

namespace elastic::simulator {

// Takes GPUs from a job's per-node allocation `alloc`, which holds `have`, until it holds `want`
// (<= have): one at a time from the node holding the fewest of the job's GPUs (ties: the highest
// index), so that shrinking empties small pieces first.
void ShrinkOnNodes(std::vector<int>& alloc, int have, int want);

// Adds `need` GPUs to a job's per-node allocation `alloc` from `free_gpus` (both indexed by node):
// first on the nodes the job already uses, then whole free nodes (`gpus_per_node` free), then the
// node with the fewest free GPUs that holds the rest (best fit), else the freest node, again until
// nothing is needed or nothing is free.
void GrowOnNodes(std::vector<int>& alloc, std::vector<int>& free_gpus, int need, int gpus_per_node);

}  // namespace elastic::simulator
