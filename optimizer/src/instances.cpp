#include "elastic/optimizer/instances.h"

#include <algorithm>
#include <array>
#include <random>
#include <string>

namespace elastic::optimizer {

namespace {
constexpr std::array<int, 12> kCounts = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
constexpr std::array<double, 4> kTypeSpeed = {1.0, 1.7, 0.6, 2.4};
constexpr std::array<const char*, 4> kTypeName = {"a100", "h100", "v100", "b200"};
}  // namespace

Snapshot RandomInstance(const InstanceSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto chance = [&](double p) { return uniform(0.0, 1.0) < p; };

  Snapshot s;
  const int types = std::clamp(spec.types, 1, 4);
  const int per_type = spec.gpus / types;
  for (int t = 0; t < types; ++t) {
    const int gpn = std::min(spec.gpus_per_node, std::max(1, per_type));
    s.cluster.types.push_back({kTypeName[t], per_type / gpn, gpn});
  }
  int max_exp = 0;
  while ((2 << max_exp) <= spec.max_gpus) ++max_exp;

  for (int i = 0; i < spec.jobs; ++i) {
    Job j;
    j.id = "job" + std::to_string(i);
    j.owner = "user" + std::to_string(i % 17);
    j.account = "acct" + std::to_string(i % 5);
    j.weight = chance(0.2) ? 2.0 : 1.0;
    // Largest size: 2^e with small sizes more likely; smallest: up to 8x below it.
    int e = 0;
    while (e < max_exp && chance(0.55)) ++e;
    j.max_gpus = 1 << e;
    j.min_gpus = chance(0.6) ? 1 : std::max(1, j.max_gpus >> std::uniform_int_distribution<int>(0, 3)(rng));
    j.gpu_step = (j.min_gpus % 2 == 0 && chance(0.1)) ? 2 : 1;
    if (types > 1 && chance(0.2)) {
      for (int t = 0; t < types; ++t) {
        if (chance(0.6)) j.allowed_types.push_back(kTypeName[t]);
      }
    }
    const double serial = uniform(0.01, 0.3);
    // Amdahl speedup, less a penalty once the job spans several nodes (slower links): the
    // utility curve is concave within a node but not across the node boundary.
    const double cross_node = uniform(0.0, 0.3);
    const int gpn = s.cluster.types.front().gpus_per_node;
    auto speedup = [&](int n) {
      const double amdahl = 1.0 / (serial + (1.0 - serial) / n);
      return n > gpn ? amdahl * (1.0 - cross_node) : amdahl;
    };
    const int64_t local = int64_t{16} << std::uniform_int_distribution<int>(0, 4)(rng);
    j.min_local_batch = std::max<int64_t>(1, local / 4);
    j.max_local_batch = local * 2;
    j.min_batch = local * j.min_gpus;
    j.max_batch = local * j.max_gpus;
    j.accumulation = chance(0.5);

    double ref = -1.0;
    for (int t = 0; t < types; ++t) {
      const std::string name = kTypeName[t];
      if (!j.TypeAllowed(name)) continue;
      const double speed = kTypeSpeed[t] * uniform(0.8, 1.25);
      if (ref < 0) ref = speed;
      for (int n : kCounts) {
        if (!j.GpuCountAllowed(n)) continue;
        Option o;
        o.gpu_type = name;
        o.gpus = n;
        o.batch = local * n;
        o.utility = speed / ref * speedup(n) / speedup(j.min_gpus) * uniform(0.97, 1.03);
        j.options.push_back(o);
      }
    }
    if (j.options.empty()) {  // every type was filtered out: draw the job again
      --i;
      continue;
    }
    j.age_s = uniform(0.0, 36000.0);
    j.rescales = std::uniform_int_distribution<int>(0, 5)(rng);
    if (chance(spec.running_fraction)) {
      j.state = JobState::kRunning;
      const Option& base = j.options.front();
      j.current = Configuration{base.gpu_type, base.gpus, base.batch};
    }
    s.jobs.push_back(std::move(j));
  }
  return s;
}

}  // namespace elastic::optimizer
