// Random benchmark and test instances with explicit option tables built from concave speedup
// curves (deterministic for a given seed).
#pragma once

#include <cstdint>

#include "elastic/optimizer/model.h"

namespace elastic::optimizer {

struct InstanceSpec {
  int jobs = 160;
  int gpus = 64;        // total GPUs, split evenly over the types (rounded to whole nodes)
  int types = 1;        // GPU types (1..4)
  int gpus_per_node = 8;
  int max_gpus = 64;    // largest GPU count a job may ask for
  uint64_t seed = 42;
  double running_fraction = 0.5;  // jobs marked running (at their base configuration)
};

// A snapshot whose jobs carry option tables: GPU counts from {1,2,3,4,6,8,12,16,24,32,48,64}
// within each job's bounds and step, utility = speed(type) * speedup(n) / speedup(min) with a
// concave (Amdahl-like) speedup with a penalty across nodes and +-3% noise, batch = base batch scaled with the GPU count within bounds.
Snapshot RandomInstance(const InstanceSpec& spec);

}  // namespace elastic::optimizer
