// The several-types MCKP (where the exact DP of mckp_multitype_exact.cpp is too large): the Lagrangian bound (mckp_dual.cpp), each job on the type it is best
// on at the multipliers, one single-type solve per type (mckp.cpp), then jobs left pending
// fill the capacity left on any type.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <utility>

#include "mckp_dual.h"
#include "mckp_rows.h"

namespace elastic::optimizer::mckp_internal {

MckpSolution SolveMultiType(const MckpProblem& p, const MckpSettings& settings, Clock::time_point start) {
  if (std::optional<MckpSolution> exact = SolveMultiTypeExactly(p, settings, start)) return *std::move(exact);
  const size_t types = p.capacity.size();
  const size_t n = p.num_jobs();
  MckpSolution out;
  out.choice.assign(n, -1);

  // 1. The Lagrangian dual (mckp_dual.h): a certified bound and the multipliers that price
  //    the types.
  const DualSolution dual = MinimiseDual(p, settings.time_budget_ms * 0.6, start);
  const std::vector<double>& lambda = dual.lambda;

  // 2. Each job goes to the type where its best reduced value is highest (jobs that the
  //    relaxation leaves pending go to their best type too: leftover capacity may fit them).
  std::vector<std::vector<uint32_t>> members(types);
  for (size_t j = 0; j < n; ++j) {
    double b = -std::numeric_limits<double>::infinity();
    int32_t bt = -1;
    for (uint32_t i = p.job_begin[j]; i < p.job_begin[j + 1]; ++i) {
      const MckpItem& it = p.items[i];
      if (it.value <= 0.0 || it.gpus > p.capacity[it.type]) continue;
      const double red = it.value - lambda[static_cast<size_t>(it.type)] * it.gpus;
      if (red > b) {
        b = red;
        bt = it.type;
      }
    }
    if (bt >= 0) members[static_cast<size_t>(bt)].push_back(static_cast<uint32_t>(j));
  }

  // 3. One single-type solve per type over its members.
  bool all_exact = true;
  std::vector<int64_t> used(types, 0);
  for (size_t t = 0; t < types; ++t) {
    Rows rows = BuildRows(p, static_cast<int32_t>(t), p.capacity[t], &members[t]);
    double b = 0.0;
    bool exact = false;
    std::string method;
    const double left = std::max(1.0, settings.time_budget_ms - MsSince(start));
    RowsSolution sol = SolveRows(rows, p.capacity[t], settings, left / static_cast<double>(types - t),
                                 b, exact, method);
    all_exact = all_exact && exact;
    for (size_t r = 0; r < rows.size(); ++r) {
      if (sol.pick[r] < 0) continue;
      const Cand& c = rows.row_begin(r)[sol.pick[r]];
      out.choice[rows.job[r]] = c.orig;
      used[t] += c.gpus;
    }
  }

  // 4. Fill: jobs left pending may fit another type's leftover capacity (best value first).
  std::vector<std::pair<double, uint32_t>> waiting;
  for (size_t j = 0; j < n; ++j) {
    if (out.choice[j] >= 0) continue;
    double best = 0.0;
    for (uint32_t i = p.job_begin[j]; i < p.job_begin[j + 1]; ++i) best = std::max(best, p.items[i].value);
    if (best > 0.0) waiting.emplace_back(best, static_cast<uint32_t>(j));
  }
  std::sort(waiting.begin(), waiting.end(), std::greater<>());
  for (const auto& [unused, j] : waiting) {
    double best = 0.0;
    int32_t bi = -1;
    for (uint32_t i = p.job_begin[j]; i < p.job_begin[j + 1]; ++i) {
      const MckpItem& it = p.items[i];
      if (it.value > best && used[it.type] + it.gpus <= p.capacity[it.type]) {
        best = it.value;
        bi = static_cast<int32_t>(i);
      }
    }
    if (bi >= 0) {
      out.choice[j] = bi - static_cast<int32_t>(p.job_begin[j]);
      used[p.items[bi].type] += p.items[bi].gpus;
    }
  }

  for (size_t j = 0; j < n; ++j) {
    if (out.choice[j] >= 0) out.objective += p.items[p.job_begin[j] + out.choice[j]].value;
  }
  out.bound = std::max(dual.bound, out.objective);
  out.exact = out.bound <= out.objective;
  out.method = all_exact ? "lagrangian-dp" : "lagrangian-lp-core-dp";
  return out;
}

}  // namespace elastic::optimizer::mckp_internal
