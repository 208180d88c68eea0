// Google Benchmark of the dp policy's solver on the instance sizes (label bench).
#include <benchmark/benchmark.h>

#include "elastic/optimizer/instances.h"
#include "elastic/optimizer/mckp.h"
#include "elastic/optimizer/policy.h"

namespace {

using namespace elastic::optimizer;

MckpProblem Problem(int jobs, int gpus, int types) {
  InstanceSpec spec;
  spec.jobs = jobs;
  spec.gpus = gpus;
  spec.types = types;
  const Snapshot s = RandomInstance(spec);
  MckpProblem p;
  for (const GpuType& t : s.cluster.types) p.capacity.push_back(t.capacity());
  for (const Job& j : s.jobs) {
    std::vector<MckpItem> row;
    for (const Option& o : j.options) row.push_back({s.cluster.TypeIndex(o.gpu_type), o.gpus, OptionValue({}, j, o)});
    p.AddJob(row);
  }
  return p;
}

void BM_Mckp(benchmark::State& state) {
  const MckpProblem p = Problem(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                                static_cast<int>(state.range(2)));
  MckpSolution s;
  for (auto _ : state) {
    s = SolveMckp(p);
    // Not DoNotOptimize(s.objective): its "+r" constraint mangles doubles with this GCC.
    benchmark::DoNotOptimize(s.choice.data());
    benchmark::ClobberMemory();
  }
  state.counters["gap"] = (s.bound - s.objective) / s.bound;
}
BENCHMARK(BM_Mckp)->Args({160, 64, 1})->Args({1000, 2048, 1})->Args({10000, 16384, 1})->Args({1000, 2048, 3})
    ->Unit(benchmark::kMillisecond);

void BM_DpPolicy(benchmark::State& state) {
  InstanceSpec spec;
  spec.jobs = static_cast<int>(state.range(0));
  spec.gpus = static_cast<int>(state.range(1));
  const Snapshot s = RandomInstance(spec);
  const auto policy = MakePolicy("dp").value();
  PolicyOptions o;
  o.place = false;
  for (auto _ : state) {
    const Plan plan = policy->Solve(s, o).value();
    benchmark::DoNotOptimize(plan.assignments.data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_DpPolicy)->Args({160, 64})->Args({1000, 2048})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
