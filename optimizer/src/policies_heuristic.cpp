// Baseline and search policies: greedy (marginal value per GPU), optimus (GPU count only,
// batch frozen), static (the user's request, first come first served), evolutionary
// (ONES-style) and pollux (Pollux-style genetic search on the power-mean objective).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <random>

#include "elastic/optimizer/policy.h"
#include "internal.h"

namespace elastic::optimizer {
namespace {

using internal::Tables;
using Clock = std::chrono::steady_clock;

// Search state: one choice per job and the GPUs used per type.
struct State {
  const Snapshot& snap;
  const Tables& tab;
  std::vector<std::vector<int>> type_idx;  // per job, per option: the option's type index
  std::vector<std::vector<char>> usable;   // per job, per option: the policy may pick it
  std::vector<int64_t> cap;
  std::vector<int64_t> used;
  std::vector<int> choice;

  State(const Snapshot& s, const Tables& t) : snap(s), tab(t) {
    for (const GpuType& g : s.cluster.types) cap.push_back(g.capacity());
    used.assign(cap.size(), 0);
    choice.assign(s.jobs.size(), -1);
    type_idx.resize(s.jobs.size());
    usable.resize(s.jobs.size());
    for (size_t j = 0; j < s.jobs.size(); ++j) {
      for (size_t k = 0; k < t.options[j].size(); ++k) {
        type_idx[j].push_back(s.cluster.TypeIndex(t.options[j][k].gpu_type));
        usable[j].push_back(t.values[j][k] > 0.0 ? 1 : 0);
      }
    }
  }
  int Gpus(size_t j, int k) const { return k < 0 ? 0 : tab.options[j][static_cast<size_t>(k)].gpus; }
  double Value(size_t j, int k) const { return k < 0 ? 0.0 : tab.values[j][static_cast<size_t>(k)]; }
  int Type(size_t j, int k) const { return type_idx[j][static_cast<size_t>(k)]; }
  // Whether job j may switch from its current choice to k without exceeding capacity.
  bool Fits(size_t j, int k) const {
    if (k < 0) return true;
    const int t = Type(j, k);
    int64_t u = used[static_cast<size_t>(t)] + Gpus(j, k);
    if (choice[j] >= 0 && Type(j, choice[j]) == t) u -= Gpus(j, choice[j]);
    return u <= cap[static_cast<size_t>(t)];
  }
  void Set(size_t j, int k) {
    if (choice[j] >= 0) used[static_cast<size_t>(Type(j, choice[j]))] -= Gpus(j, choice[j]);
    choice[j] = k;
    if (k >= 0) used[static_cast<size_t>(Type(j, k))] += Gpus(j, k);
  }
  double Objective() const {
    double v = 0.0;
    for (size_t j = 0; j < choice.size(); ++j) v += Value(j, choice[j]);
    return v;
  }
};

// Best upgrade of job j that fits: value gained per extra GPU (an upgrade that saves GPUs
// and gains value ranks first). `next_only`: only the next larger option of the same type.
struct Upgrade {
  double score = -1.0;
  int option = -1;
};

Upgrade BestUpgrade(const State& st, size_t j, bool next_only) {
  Upgrade best;
  const int cur = st.choice[j];
  const double v0 = st.Value(j, cur);
  const int w0 = st.Gpus(j, cur);
  int next_gpus = std::numeric_limits<int>::max();
  for (size_t kk = 0; kk < st.tab.options[j].size(); ++kk) {
    const int k = static_cast<int>(kk);
    if (!st.usable[j][kk] || k == cur) continue;
    if (cur >= 0 && st.Type(j, k) != st.Type(j, cur)) continue;  // no type changes once placed
    if (next_only && cur >= 0) {
      const int w = st.Gpus(j, k);
      if (w <= w0 || w > next_gpus) continue;
      if (w < next_gpus) {
        next_gpus = w;
        best = {};
      }
    }
    const double dv = st.Value(j, k) - v0;
    if (dv <= 0.0 || !st.Fits(j, k)) continue;
    const int dw = st.Gpus(j, k) - w0;
    const double score = dw <= 0 ? std::numeric_limits<double>::max() : dv / dw;
    if (score > best.score) best = {score, k};
  }
  return best;
}

// Repeatedly applies the best upgrade over all jobs (lazy priority queue: a popped entry is
// re-evaluated against the current state before it is applied).
void MarginalGreedy(State& st, bool next_only) {
  using Entry = std::pair<double, size_t>;
  std::priority_queue<Entry> heap;
  for (size_t j = 0; j < st.choice.size(); ++j) {
    const Upgrade u = BestUpgrade(st, j, next_only);
    if (u.option >= 0) heap.emplace(u.score, j);
  }
  while (!heap.empty()) {
    const auto [score, j] = heap.top();
    heap.pop();
    const Upgrade u = BestUpgrade(st, j, next_only);
    if (u.option < 0) continue;
    if (u.score < score) {  // stale: re-queue with the current score
      heap.emplace(u.score, j);
      continue;
    }
    st.Set(j, u.option);
    const Upgrade next = BestUpgrade(st, j, next_only);
    if (next.option >= 0) heap.emplace(next.score, j);
  }
}

// The job's "request": its current configuration when running, else its smallest option on
// its first usable type. -1 when it has no usable option.
int RequestOption(const State& st, size_t j) {
  const Job& job = st.snap.jobs[j];
  const auto& opts = st.tab.options[j];
  int best = -1;
  for (size_t k = 0; k < opts.size(); ++k) {
    if (job.current && opts[k].gpu_type == job.current->gpu_type && opts[k].gpus == job.current->gpus &&
        (opts[k].batch == 0 || opts[k].batch == job.current->batch)) {
      return static_cast<int>(k);
    }
  }
  for (size_t k = 0; k < opts.size(); ++k) {
    if (best < 0 || (opts[k].gpu_type == opts[static_cast<size_t>(best)].gpu_type &&
                     opts[k].gpus < opts[static_cast<size_t>(best)].gpus)) {
      best = static_cast<int>(k);
    }
  }
  return best;
}

// Jobs in first-come order: running jobs first, then the oldest.
std::vector<size_t> FifoOrder(const Snapshot& s) {
  std::vector<size_t> order(s.jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const bool ra = s.jobs[a].state == JobState::kRunning;
    const bool rb = s.jobs[b].state == JobState::kRunning;
    if (ra != rb) return ra;
    return s.jobs[a].age_s > s.jobs[b].age_s;
  });
  return order;
}

// Shared driver: validates, builds tables, runs `body`, finishes the plan.
template <typename Body>
Result<Plan> RunPolicy(std::string_view name, const Snapshot& snapshot, const PolicyOptions& options,
                       const Objective& objective, Body body) {
  const auto start = Clock::now();
  // A policy searching under an objective of its own still reports under the caller's.
  if (&objective != &options.objective) {
    if (Status s = internal::CheckObjective(options.objective); !s.ok()) return s;
  }
  Result<Tables> tables = internal::PrepareTables(snapshot, objective, options.keep_running);
  if (!tables.ok()) return tables.status();
  State st(snapshot, tables.value());
  body(st, start);
  Plan plan = internal::MakePlan(snapshot, tables.value(), st.choice, std::string(name));
  plan.method = std::string(name);
  // A policy that searches under an objective of its own (pollux) still reports the plan's
  // value under the caller's, so that plans of different policies compare.
  if (&objective != &options.objective) plan.objective = EvaluatePlan(snapshot, plan, options.objective);
  if (Status s = internal::Finish(snapshot, options, start, plan); !s.ok()) return s;
  return plan;
}

class GreedyPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "greedy"; }
  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    return RunPolicy(name(), snapshot, options, options.objective,
                     [](State& st, Clock::time_point) { MarginalGreedy(st, false); });
  }
};

class OptimusPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "optimus"; }
  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    // Optimus (Peng et al., EuroSys 2018) gives the next GPU to the job whose remaining time it
    // shortens most: remaining_s * (1 / u(n) - 1 / u(n + 1)) with utilities relative to the base
    // size. That is the marginal value under the power mean p = -1 with weights remaining_s
    // (srpt_exponent -1); jobs without a known remaining time weigh 1 hour.
    Objective obj = options.objective;
    obj.kind = ObjectiveKind::kPowerMean;
    obj.p = -1.0;
    obj.pending_penalty = 1e6;
    obj.srpt_exponent = -1.0;
    obj.rescale_payback = 0.0;
    // Running jobs come first in the first-come-first-served start below, which keeps them
    // running; the keep_running bonus would only blur the gains (and make options worth nothing
    // of their own look usable, from which the one-step climb cannot recover).
    PolicyOptions own = options;
    own.keep_running = false;
    return RunPolicy(name(), snapshot, own, obj, [](State& st, Clock::time_point) {
      // Freeze each job's batch and type at its request; only the GPU count may change.
      for (size_t j = 0; j < st.choice.size(); ++j) {
        const int req = RequestOption(st, j);
        for (size_t k = 0; k < st.usable[j].size(); ++k) {
          if (req < 0) {
            st.usable[j][k] = 0;
            continue;
          }
          const Option& r = st.tab.options[j][static_cast<size_t>(req)];
          const Option& o = st.tab.options[j][k];
          const bool same_batch = o.batch == 0 || r.batch == 0 || o.batch == r.batch;
          if (o.gpu_type != r.gpu_type || !same_batch) st.usable[j][k] = 0;
        }
      }
      // Every job starts at its smallest size (first come first served), then one more
      // step at a time to the job with the largest gain per GPU.
      for (size_t j : FifoOrder(st.snap)) {
        int smallest = -1;
        for (size_t k = 0; k < st.usable[j].size(); ++k) {
          if (st.usable[j][k] && (smallest < 0 || st.Gpus(j, static_cast<int>(k)) < st.Gpus(j, smallest))) {
            smallest = static_cast<int>(k);
          }
        }
        if (smallest >= 0 && st.Fits(j, smallest)) st.Set(j, smallest);
      }
      MarginalGreedy(st, true);
    });
  }
};

class StaticPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "static"; }
  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    return RunPolicy(name(), snapshot, options, options.objective, [](State& st, Clock::time_point) {
      for (size_t j : FifoOrder(st.snap)) {
        const int req = RequestOption(st, j);
        if (req >= 0 && st.Fits(j, req)) st.Set(j, req);
      }
    });
  }
};

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

void Genetic(State& st, const GaParams& ga, uint64_t seed, double budget_ms, Clock::time_point start) {
  std::mt19937_64 rng(seed);
  const size_t n = st.choice.size();
  MarginalGreedy(st, false);
  if (n == 0) return;
  struct Member {
    std::vector<int> choice;
    double fitness;
  };
  std::vector<Member> pop;
  pop.push_back({st.choice, st.Objective()});
  const std::vector<int> greedy = st.choice;

  auto load = [&](const std::vector<int>& c) {
    std::fill(st.used.begin(), st.used.end(), 0);
    std::fill(st.choice.begin(), st.choice.end(), -1);
    for (size_t j = 0; j < n; ++j) {
      if (c[j] >= 0) st.Set(j, c[j]);
    }
  };
  // Neighbouring option: the next smaller or larger usable option of the same type, or a
  // random usable option for a pending job, or pending.
  auto mutate_job = [&](size_t j) {
    const auto& opts = st.tab.options[j];
    if (opts.empty()) return;
    const int cur = st.choice[j];
    std::vector<int> cand{-1};
    for (size_t k = 0; k < opts.size(); ++k) {
      if (!st.usable[j][k]) continue;
      if (cur < 0 || opts[k].gpu_type == opts[static_cast<size_t>(cur)].gpu_type) cand.push_back(static_cast<int>(k));
    }
    const int pick = cand[std::uniform_int_distribution<size_t>(0, cand.size() - 1)(rng)];
    st.Set(j, pick);
  };
  auto repair = [&]() {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t t = 0; t < st.cap.size(); ++t) {
      for (size_t j : order) {
        if (st.used[t] <= st.cap[t]) break;
        if (st.choice[j] >= 0 && static_cast<size_t>(st.Type(j, st.choice[j])) == t) st.Set(j, -1);
      }
    }
    MarginalGreedy(st, false);
  };

  // Initial population: perturbations of the greedy plan.
  while (pop.size() < ga.population) {
    load(greedy);
    const size_t flips = 1 + n / 50;
    for (size_t f = 0; f < flips; ++f) mutate_job(std::uniform_int_distribution<size_t>(0, n - 1)(rng));
    repair();
    pop.push_back({st.choice, st.Objective()});
  }
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  for (int gen = 0; gen < ga.generations && internal::MsSince(start) < budget_ms; ++gen) {
    const size_t parents = pop.size();
    for (size_t c = 0; c < ga.population; ++c) {
      const Member& a = pop[std::uniform_int_distribution<size_t>(0, parents - 1)(rng)];
      const Member& b = pop[std::uniform_int_distribution<size_t>(0, parents - 1)(rng)];
      std::vector<int> child = a.choice;
      if (coin(rng) < ga.crossover) {
        for (size_t j = 0; j < n; ++j) {
          if (coin(rng) < 0.5) child[j] = b.choice[j];
        }
      }
      load(child);
      if (coin(rng) < ga.mutation) {
        const size_t flips = 1 + n / 100;
        for (size_t f = 0; f < flips; ++f) mutate_job(std::uniform_int_distribution<size_t>(0, n - 1)(rng));
      }
      repair();
      pop.push_back({st.choice, st.Objective()});
    }
    std::sort(pop.begin(), pop.end(), [](const Member& x, const Member& y) { return x.fitness > y.fitness; });
    pop.resize(ga.population);
  }
  const auto best = std::max_element(pop.begin(), pop.end(),
                                     [](const Member& x, const Member& y) { return x.fitness < y.fitness; });
  load(best->choice);
}

class EvolutionaryPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "evolutionary"; }
  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    return RunPolicy(name(), snapshot, options, options.objective, [&](State& st, Clock::time_point start) {
      Genetic(st, {16, 100, 0.5, 0.3}, options.seed, options.time_budget_ms, start);
    });
  }
};

class PolluxPolicy final : public Policy {
 public:
  std::string_view name() const noexcept override { return "pollux"; }
  Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const override {
    // Pollux optimises the power mean of speedups (p = -1 unless the caller chose a power mean
    // of its own). A job without GPUs counts as Pollux counts it: its speedup is 0, floored at
    // 1e-3 in Pollux's scaled units, where one GPU of a node with G GPUs is worth 1/G. So a
    // pending job costs (1e-3)^-1 = 1000 where a job at its base size costs G: relative to the
    // base (our unit), 1000 / G (250 on 4-GPU nodes), not Sia's 1.1. Running as many jobs as
    // possible thus comes first, which is what keeps Pollux's JCT low under heavy load.
    Objective obj = options.objective;
    if (obj.kind != ObjectiveKind::kPowerMean) {
      obj.kind = ObjectiveKind::kPowerMean;
      obj.p = -1.0;
      obj.pending_penalty = PolluxPendingPenalty(snapshot.cluster);
    }
    return RunPolicy(name(), snapshot, options, obj, [&](State& st, Clock::time_point start) {
      Genetic(st, {100, 100, 0.5, 0.3}, options.seed, options.time_budget_ms, start);
    });
  }
};

}  // namespace

std::unique_ptr<Policy> MakeGreedyPolicy() { return std::make_unique<GreedyPolicy>(); }
std::unique_ptr<Policy> MakeOptimusPolicy() { return std::make_unique<OptimusPolicy>(); }
std::unique_ptr<Policy> MakeStaticPolicy() { return std::make_unique<StaticPolicy>(); }
std::unique_ptr<Policy> MakeEvolutionaryPolicy() { return std::make_unique<EvolutionaryPolicy>(); }
std::unique_ptr<Policy> MakePolluxPolicy() { return std::make_unique<PolluxPolicy>(); }

}  // namespace elastic::optimizer
