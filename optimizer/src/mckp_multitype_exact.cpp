// The several-types MCKP solved exactly when its capacity space is small: one DP over every
// combination of GPUs used per type (a centre's small or medium cluster of a few types: e.g. 16 +
// 24 + 24 GPUs are 10,625 combinations). The Lagrangian method (mckp_multitype.cpp) certifies a
// small gap on large instances, but with few jobs and values of very different size (a
// remaining-time objective) the relaxation's gap can be large, and plans that are not optimal
// move jobs between types from one epoch to the next.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include "mckp_rows.h"

namespace elastic::optimizer::mckp_internal {

namespace {

struct TypedCand {
  size_t type;
  int64_t units;  // GPUs / the type's unit
  double value;
  int32_t orig;
};

}  // namespace

std::optional<MckpSolution> SolveMultiTypeExactly(const MckpProblem& p, const MckpSettings& settings,
                                                  Clock::time_point start) {
  const size_t types = p.capacity.size();
  const size_t n = p.num_jobs();
  // The jobs' pruned candidates on every type, and each type's unit (gcd of its candidates).
  std::vector<std::vector<TypedCand>> jobs(n);
  std::vector<int64_t> unit(types, 0);
  std::vector<Rows> rows(types);
  for (size_t t = 0; t < types; ++t) {
    rows[t] = BuildRows(p, static_cast<int32_t>(t), p.capacity[t], nullptr);
    for (const Cand& c : rows[t].cands) unit[t] = std::gcd(unit[t], c.gpus);
  }
  std::vector<int64_t> radix(types, 1), stride(types, 1);
  size_t states = 1;
  const size_t max_states = settings.max_type_states;
  if (max_states == 0) return std::nullopt;
  for (size_t t = 0; t < types; ++t) {
    radix[t] = unit[t] > 0 ? p.capacity[t] / unit[t] + 1 : 1;
    stride[t] = static_cast<int64_t>(states);
    if (states > max_states / static_cast<size_t>(radix[t])) return std::nullopt;
    states *= static_cast<size_t>(radix[t]);
  }
  size_t cands = 0;
  for (size_t t = 0; t < types; ++t) {
    for (size_t r = 0; r < rows[t].size(); ++r) {
      for (size_t k = 0; k < rows[t].row_len(r); ++k) {
        const Cand& c = rows[t].row_begin(r)[k];
        jobs[rows[t].job[r]].push_back({t, c.gpus / unit[t], c.value, c.orig});
        ++cands;
      }
    }
  }
  std::vector<uint32_t> order;  // jobs with a candidate
  for (size_t j = 0; j < n; ++j) {
    if (!jobs[j].empty()) order.push_back(static_cast<uint32_t>(j));
  }
  // Within the memory cap (a 16-bit choice per job and state) and half the time left.
  const double predicted_ms = static_cast<double>(states) * static_cast<double>(cands) * settings.ns_per_cell * 1e-6;
  if (order.size() * states * sizeof(int16_t) > settings.max_table_bytes ||
      predicted_ms > 0.5 * (settings.time_budget_ms - MsSince(start))) {
    return std::nullopt;
  }
  for (uint32_t j : order) {
    if (jobs[j].size() > 32767) return std::nullopt;
  }

  // coord[t][s]: the units of type t used in state s.
  std::vector<std::vector<uint32_t>> coord(types, std::vector<uint32_t>(states));
  for (size_t t = 0; t < types; ++t) {
    for (size_t s = 0; s < states; ++s) {
      coord[t][s] = static_cast<uint32_t>((static_cast<int64_t>(s) / stride[t]) % radix[t]);
    }
  }
  std::vector<double> best(states, 0.0), next(states);
  std::vector<int16_t> choice(order.size() * states, -1);
  for (size_t r = 0; r < order.size(); ++r) {
    next = best;
    int16_t* pick = choice.data() + r * states;
    const auto& cs = jobs[order[r]];
    for (size_t k = 0; k < cs.size(); ++k) {
      const TypedCand& c = cs[k];
      const uint32_t* have = coord[c.type].data();
      const auto shift = static_cast<size_t>(c.units * stride[c.type]);
      for (size_t s = shift; s < states; ++s) {
        if (have[s] < c.units) continue;
        const double v = best[s - shift] + c.value;
        if (v > next[s]) {
          next[s] = v;
          pick[s] = static_cast<int16_t>(k);
        }
      }
    }
    best.swap(next);
  }

  MckpSolution out;
  out.choice.assign(n, -1);
  size_t s = static_cast<size_t>(std::max_element(best.begin(), best.end()) - best.begin());
  out.objective = best[s];
  for (size_t r = order.size(); r-- > 0;) {
    const int16_t k = choice[r * states + s];
    if (k < 0) continue;
    const TypedCand& c = jobs[order[r]][static_cast<size_t>(k)];
    out.choice[order[r]] = c.orig;
    s -= static_cast<size_t>(c.units * stride[c.type]);
  }
  // The objective again from the choices (sums in the plan's order, as the other methods do).
  out.objective = 0.0;
  for (size_t j = 0; j < n; ++j) {
    if (out.choice[j] >= 0) out.objective += p.items[p.job_begin[j] + out.choice[j]].value;
  }
  out.bound = out.objective;
  out.exact = true;
  out.method = "exact-dp-types";
  return out;
}

}  // namespace elastic::optimizer::mckp_internal
