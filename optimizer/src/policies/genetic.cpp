#include "genetic.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace elastic::optimizer::internal {

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

}  // namespace elastic::optimizer::internal
