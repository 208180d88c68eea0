// The search machinery of the policies that build a plan one job's option at a time (greedy,
// optimus, static, evolutionary, pollux): the search state, the marginal-value climb, a job's
// request, first-come order, and the driver that turns a search into a finished plan.
// Not part of the public interface.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../internal.h"
#include "elastic/optimizer/policy.h"

namespace elastic::optimizer::internal {

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

// Repeatedly applies the best upgrade over all jobs: the one with the most value gained per extra
// GPU (an upgrade that saves GPUs and gains value ranks first). `next_only`: only the next larger
// option of the same type. Lazy priority queue: a popped entry is re-evaluated against the
// current state before it is applied.
void MarginalGreedy(State& st, bool next_only);

// The job's "request": its current configuration when running, else its smallest option on
// its first usable type. -1 when it has no usable option.
int RequestOption(const State& st, size_t j);

// Jobs in first-come order: running jobs first, then the oldest.
std::vector<size_t> FifoOrder(const Snapshot& s);

// Shared driver: validates, builds tables, runs `body`, finishes the plan.
template <typename Body>
Result<Plan> RunPolicy(std::string_view name, const Snapshot& snapshot, const PolicyOptions& options,
                       const Objective& objective, Body body) {
  const auto start = Clock::now();
  // A policy searching under an objective of its own still reports under the caller's.
  if (&objective != &options.objective) {
    if (Status s = CheckObjective(options.objective); !s.ok()) return s;
  }
  Result<Tables> tables = PrepareTables(snapshot, objective, options.keep_running);
  if (!tables.ok()) return tables.status();
  State st(snapshot, tables.value());
  body(st, start);
  Plan plan = MakePlan(snapshot, tables.value(), st.choice, std::string(name));
  plan.method = std::string(name);
  // A policy that searches under an objective of its own (pollux) still reports the plan's
  // value under the caller's, so that plans of different policies compare.
  if (&objective != &options.objective) plan.objective = EvaluatePlan(snapshot, plan, options.objective);
  if (Status s = Finish(snapshot, options, start, plan); !s.ok()) return s;
  return plan;
}

}  // namespace elastic::optimizer::internal
