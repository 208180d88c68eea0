// Multiple-choice knapsack solvers of one GPU type: exact DP, LP relaxation + core DP, and the
// SolveMckp entry point (several types: mckp_multitype.cpp). See mckp.h for the overview; the
// comments here explain the data layout and the invariants.
#include "elastic/optimizer/mckp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "elastic/common/error.h"
#include "mckp_rows.h"

namespace elastic::optimizer {

void MckpProblem::AddJob(const std::vector<MckpItem>& job_items) {
  items.insert(items.end(), job_items.begin(), job_items.end());
  job_begin.push_back(static_cast<uint32_t>(items.size()));
}

namespace mckp_internal {
namespace {

// Appends job `j`'s items of type `type` to `rows` (nothing when none survives pruning).
// Pruning keeps an item only if no other item of the job on this type has at most as many
// GPUs and at least as much value; items with value <= 0 (pending is better) or more GPUs
// than the capacity are dropped.
void AppendRow(const MckpProblem& p, size_t j, int32_t type, int64_t cap, Rows& rows,
               std::vector<Cand>& scratch) {
  scratch.clear();
  for (uint32_t i = p.job_begin[j]; i < p.job_begin[j + 1]; ++i) {
    const MckpItem& it = p.items[i];
    if (it.type != type || it.value <= 0.0 || it.gpus > cap) continue;
    scratch.push_back({it.gpus, it.value, static_cast<int32_t>(i - p.job_begin[j])});
  }
  if (scratch.empty()) return;
  std::sort(scratch.begin(), scratch.end(), [](const Cand& a, const Cand& b) {
    return a.gpus != b.gpus ? a.gpus < b.gpus : a.value > b.value;
  });
  double best = 0.0;
  for (const Cand& c : scratch) {
    if (c.value > best) {
      rows.cands.push_back(c);
      best = c.value;
    }
  }
  rows.begin.push_back(static_cast<uint32_t>(rows.cands.size()));
  rows.job.push_back(static_cast<uint32_t>(j));
}

}  // namespace

Rows BuildRows(const MckpProblem& p, int32_t type, int64_t cap, const std::vector<uint32_t>* subset) {
  Rows rows;
  std::vector<Cand> scratch;
  if (subset) {
    for (uint32_t j : *subset) AppendRow(p, j, type, cap, rows, scratch);
  } else {
    for (size_t j = 0; j < p.num_jobs(); ++j) AppendRow(p, j, type, cap, rows, scratch);
  }
  return rows;
}

namespace {

// The order in which the DP visits rows (smallest largest-item first keeps the reachable
// capacity small for as long as possible) and the predicted number of cell updates.
struct DpPlan {
  std::vector<uint32_t> order;
  int64_t scale = 1;     // gcd of all GPU counts: the DP runs on capacity / scale
  int64_t capacity = 0;  // scaled, capped by the total demand
  double cells = 0.0;    // sum over rows of (reachable capacity + 1) * candidates
  double table_bytes = 0.0;
  bool wide = false;  // some row has more than 255 candidates: 16-bit choice cells
};

DpPlan PlanDp(const Rows& rows, int64_t cap) {
  DpPlan plan;
  plan.order.resize(rows.size());
  std::iota(plan.order.begin(), plan.order.end(), 0U);
  std::sort(plan.order.begin(), plan.order.end(), [&](uint32_t a, uint32_t b) {
    return rows.row_max_gpus(a) < rows.row_max_gpus(b);
  });
  int64_t g = 0;
  for (const Cand& c : rows.cands) g = std::gcd(g, c.gpus);
  plan.scale = g > 0 ? g : 1;
  int64_t demand = 0;
  int64_t scaled_cap = cap / plan.scale;
  for (uint32_t r : plan.order) {
    demand = std::min(scaled_cap, demand + rows.row_max_gpus(r) / plan.scale);
    plan.cells += static_cast<double>(demand + 1) * static_cast<double>(rows.row_len(r));
    plan.table_bytes += static_cast<double>(demand + 1);
    if (rows.row_len(r) > 255) plan.wide = true;
  }
  plan.capacity = demand;
  if (plan.wide) plan.table_bytes *= 2;
  return plan;
}

// Exact DP over capacity. best[c] is the best value of the rows seen so far using at most c
// (scaled) GPUs; row r's choice for every c <= reach_r is kept in `table` (ChoiceT per cell,
// 0 = none, k+1 = candidate k), which is all that reconstruction needs.
template <typename ChoiceT>
RowsSolution RunDp(const Rows& rows, const DpPlan& plan) {
  const size_t n = rows.size();
  const int64_t cap = plan.capacity;
  const int64_t scale = plan.scale;
  std::vector<double> cur(static_cast<size_t>(cap) + 1, 0.0);
  std::vector<double> nxt(static_cast<size_t>(cap) + 1, 0.0);
  std::vector<size_t> offset(n + 1, 0);
  std::vector<int64_t> reach(n, 0);
  std::vector<ChoiceT> table(static_cast<size_t>(plan.table_bytes / sizeof(ChoiceT)) + 1);
  std::vector<int64_t> w;
  int64_t prev = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = plan.order[i];
    const Cand* cands = rows.row_begin(r);
    const size_t k = rows.row_len(r);
    const int64_t hi = std::min(cap, prev + rows.row_max_gpus(r) / scale);
    // best[] is non-decreasing and flat beyond the previous reach.
    std::fill(cur.begin() + prev + 1, cur.begin() + hi + 1, cur[static_cast<size_t>(prev)]);
    std::copy(cur.begin(), cur.begin() + hi + 1, nxt.begin());
    ChoiceT* ch = table.data() + offset[i];
    std::memset(ch, 0, static_cast<size_t>(hi + 1) * sizeof(ChoiceT));
    const double* in = cur.data();
    double* out = nxt.data();
    for (size_t c = 0; c < k; ++c) {
      const int64_t wc = cands[c].gpus / scale;
      const double v = cands[c].value;
      const auto tag = static_cast<ChoiceT>(c + 1);
      for (int64_t x = wc; x <= hi; ++x) {
        const double t = in[x - wc] + v;
        if (t > out[x]) {
          out[x] = t;
          ch[x] = tag;
        }
      }
    }
    cur.swap(nxt);
    reach[i] = hi;
    offset[i + 1] = offset[i] + static_cast<size_t>(hi) + 1;
    prev = hi;
  }
  RowsSolution sol;
  sol.pick.assign(n, -1);
  sol.value = cur[static_cast<size_t>(prev)];
  int64_t c = prev;
  for (size_t i = n; i-- > 0;) {
    c = std::min(c, reach[i]);
    const ChoiceT tag = table[offset[i] + static_cast<size_t>(c)];
    if (tag != 0) {
      const uint32_t r = plan.order[i];
      const int32_t k = static_cast<int32_t>(tag) - 1;
      sol.pick[r] = k;
      c -= rows.row_begin(r)[k].gpus / scale;
    }
  }
  return sol;
}

RowsSolution ExactDp(const Rows& rows, const DpPlan& plan) {
  if (rows.size() == 0) return {0.0, {}};
  return plan.wide ? RunDp<uint16_t>(rows, plan) : RunDp<uint8_t>(rows, plan);
}

// One segment of a job's upper convex hull: moving from candidate `from` (-1: nothing) to
// candidate `to` costs dw GPUs and gains dv value.
struct Segment {
  double eff;
  double dv;
  int64_t dw;
  uint32_t row;
  int32_t to;
};

void HullSegments(const Rows& rows, std::vector<Segment>& segs) {
  std::vector<int32_t> hull;
  for (size_t r = 0; r < rows.size(); ++r) {
    const Cand* c = rows.row_begin(r);
    const auto k = static_cast<int32_t>(rows.row_len(r));
    hull.clear();
    // Upper concave hull through the origin (the "nothing" point) and the candidates.
    auto gx = [&](int32_t i) { return i < 0 ? 0.0 : static_cast<double>(c[i].gpus); };
    auto gy = [&](int32_t i) { return i < 0 ? 0.0 : c[i].value; };
    for (int32_t i = 0; i < k; ++i) {
      while (!hull.empty()) {
        const int32_t b = hull.back();
        const int32_t a = hull.size() >= 2 ? hull[hull.size() - 2] : -1;
        // Drop b when it lies on or below the chord a -> i.
        const double lhs = (gy(b) - gy(a)) * (gx(i) - gx(a));
        const double rhs = (gy(i) - gy(a)) * (gx(b) - gx(a));
        if (lhs <= rhs) {
          hull.pop_back();
        } else {
          break;
        }
      }
      hull.push_back(i);
    }
    int32_t prev = -1;
    for (int32_t h : hull) {
      Segment s;
      s.dw = c[h].gpus - (prev < 0 ? 0 : c[prev].gpus);
      s.dv = c[h].value - (prev < 0 ? 0.0 : c[prev].value);
      s.eff = s.dv / static_cast<double>(s.dw);
      s.row = static_cast<uint32_t>(r);
      s.to = h;
      segs.push_back(s);
      prev = h;
    }
  }
}

// LP relaxation of a single-type MCKP: the greedy over hull segments by decreasing
// efficiency is optimal; at most one job (the break segment's) is fractional.
struct LpSolution {
  double bound = 0.0;
  double value = 0.0;         // integer part: every job at its last fully taken hull point
  std::vector<int32_t> pick;  // that integer solution per row
  int64_t used = 0;
  std::vector<Segment> segs;  // sorted by decreasing efficiency
  size_t brk = 0;             // index of the break segment (segs.size() when all fit)
};

LpSolution SolveLp(const Rows& rows, int64_t cap) {
  LpSolution lp;
  HullSegments(rows, lp.segs);
  std::sort(lp.segs.begin(), lp.segs.end(), [](const Segment& a, const Segment& b) {
    if (a.eff != b.eff) return a.eff > b.eff;
    if (a.row != b.row) return a.row < b.row;
    return a.to < b.to;
  });
  lp.pick.assign(rows.size(), -1);
  size_t i = 0;
  for (; i < lp.segs.size(); ++i) {
    const Segment& s = lp.segs[i];
    if (lp.used + s.dw > cap) break;
    lp.used += s.dw;
    lp.value += s.dv;
    lp.pick[s.row] = s.to;
  }
  lp.brk = i;
  lp.bound = lp.value;
  if (i < lp.segs.size()) {
    const Segment& s = lp.segs[i];
    lp.bound += s.dv * static_cast<double>(cap - lp.used) / static_cast<double>(s.dw);
  }
  return lp;
}

double PickValue(const Rows& rows, const std::vector<int32_t>& pick) {
  double v = 0.0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (pick[r] >= 0) v += rows.row_begin(r)[pick[r]].value;
  }
  return v;
}

int64_t PickGpus(const Rows& rows, const std::vector<int32_t>& pick) {
  int64_t g = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (pick[r] >= 0) g += rows.row_begin(r)[pick[r]].gpus;
  }
  return g;
}

// Spends leftover capacity on the single best upgrade per row, best gain first.
void GreedyFill(const Rows& rows, int64_t cap, std::vector<int32_t>& pick) {
  int64_t left = cap - PickGpus(rows, pick);
  bool improved = true;
  while (improved && left > 0) {
    improved = false;
    double best_gain = 0.0;
    size_t best_row = 0;
    int32_t best_k = -1;
    for (size_t r = 0; r < rows.size(); ++r) {
      const Cand* c = rows.row_begin(r);
      const int64_t w0 = pick[r] >= 0 ? c[pick[r]].gpus : 0;
      const double v0 = pick[r] >= 0 ? c[pick[r]].value : 0.0;
      for (size_t k = 0; k < rows.row_len(r); ++k) {
        if (c[k].gpus - w0 > left) break;
        const double gain = c[k].value - v0;
        if (gain > best_gain) {
          best_gain = gain;
          best_row = r;
          best_k = static_cast<int32_t>(k);
        }
      }
    }
    if (best_k >= 0) {
      const Cand* c = rows.row_begin(best_row);
      left -= c[best_k].gpus - (pick[best_row] >= 0 ? c[pick[best_row]].gpus : 0);
      pick[best_row] = best_k;
      improved = true;
    }
  }
}

// Single type, too large for the exact DP: LP bound, LP integer part, exact DP over the core
// of rows around the break segment with the capacity the LP gave them plus the leftover.
RowsSolution LpCoreSolve(const Rows& rows, int64_t cap, const MckpSettings& settings,
                         double budget_ms, double& bound) {
  LpSolution lp = SolveLp(rows, cap);
  bound = lp.bound;
  RowsSolution sol;
  sol.pick = lp.pick;
  if (lp.brk >= lp.segs.size()) {  // everything fits: the LP solution is integral
    sol.value = lp.value;
    return sol;
  }
  // Grow the core outwards from the break segment while the core DP stays within budget.
  size_t want = std::max<size_t>(settings.core_jobs, 8);
  for (;;) {
    std::vector<char> in_core(rows.size(), 0);
    std::vector<uint32_t> core;
    for (size_t d = 0; core.size() < want && (lp.brk >= d || lp.brk + d < lp.segs.size()); ++d) {
      for (size_t idx : {lp.brk + d, lp.brk >= d ? lp.brk - d : lp.segs.size()}) {
        if (idx >= lp.segs.size() || core.size() >= want) continue;
        const uint32_t r = lp.segs[idx].row;
        if (!in_core[r]) {
          in_core[r] = 1;
          core.push_back(r);
        }
      }
    }
    Rows sub;
    int64_t core_cap = cap - lp.used;
    for (uint32_t r : core) {
      const Cand* c = rows.row_begin(r);
      if (lp.pick[r] >= 0) core_cap += c[lp.pick[r]].gpus;
      sub.cands.insert(sub.cands.end(), c, c + rows.row_len(r));
      sub.begin.push_back(static_cast<uint32_t>(sub.cands.size()));
      sub.job.push_back(r);
    }
    DpPlan plan = PlanDp(sub, core_cap);
    const double predicted = plan.cells * settings.ns_per_cell * 1e-6;
    if ((predicted > budget_ms || plan.table_bytes > static_cast<double>(settings.max_table_bytes)) &&
        want > 8) {
      want /= 2;
      continue;
    }
    RowsSolution core_sol = ExactDp(sub, plan);
    for (size_t i = 0; i < core.size(); ++i) sol.pick[core[i]] = core_sol.pick[i];
    GreedyFill(rows, cap, sol.pick);
    sol.value = PickValue(rows, sol.pick);
    return sol;
  }
}

}  // namespace

RowsSolution SolveRows(const Rows& rows, int64_t cap, const MckpSettings& settings, double budget_ms,
                       double& bound, bool& exact, std::string& method) {
  DpPlan plan = PlanDp(rows, cap);
  const double predicted = plan.cells * settings.ns_per_cell * 1e-6;
  if (settings.force_exact ||
      (predicted <= budget_ms && plan.table_bytes <= static_cast<double>(settings.max_table_bytes))) {
    RowsSolution sol = ExactDp(rows, plan);
    bound = sol.value;
    exact = true;
    method = "exact-dp";
    return sol;
  }
  exact = false;
  method = "lp-core-dp";
  return LpCoreSolve(rows, cap, settings, budget_ms / 2, bound);
}

namespace {

void CheckInput(const MckpProblem& p) {
  if (p.job_begin.empty() || p.job_begin.front() != 0 || p.job_begin.back() != p.items.size()) {
    throw Error(ErrorKind::kInvalidArgument, "mckp: job_begin does not index items");
  }
  for (int64_t c : p.capacity) {
    if (c < 0) throw Error(ErrorKind::kInvalidArgument, "mckp: negative capacity");
  }
  for (const MckpItem& it : p.items) {
    if (it.type < 0 || static_cast<size_t>(it.type) >= p.capacity.size()) {
      throw Error(ErrorKind::kInvalidArgument, "mckp: item type out of range");
    }
    if (it.gpus < 1) throw Error(ErrorKind::kInvalidArgument, "mckp: item with fewer than 1 GPU");
    if (!std::isfinite(it.value)) throw Error(ErrorKind::kInvalidArgument, "mckp: non-finite item value");
  }
}

}  // namespace
}  // namespace mckp_internal

using mckp_internal::BuildRows;
using mckp_internal::Clock;
using mckp_internal::MsSince;
using mckp_internal::Rows;
using mckp_internal::RowsSolution;
using mckp_internal::SolveRows;

MckpSolution SolveMckp(const MckpProblem& problem, const MckpSettings& settings) {
  const auto start = Clock::now();
  mckp_internal::CheckInput(problem);
  MckpSolution out;
  const size_t types = problem.capacity.size();
  // Types that no job uses do not make a problem multi-type.
  std::vector<char> type_used(types, 0);
  for (const MckpItem& it : problem.items) {
    if (it.value > 0.0 && it.gpus <= problem.capacity[it.type]) type_used[it.type] = 1;
  }
  const auto used_types = static_cast<size_t>(std::count(type_used.begin(), type_used.end(), 1));
  if (used_types <= 1) {
    out.choice.assign(problem.num_jobs(), -1);
    if (used_types == 1) {
      const auto t = static_cast<int32_t>(std::find(type_used.begin(), type_used.end(), 1) - type_used.begin());
      Rows rows = BuildRows(problem, t, problem.capacity[t], nullptr);
      RowsSolution sol = SolveRows(rows, problem.capacity[t], settings, settings.time_budget_ms, out.bound,
                                   out.exact, out.method);
      out.objective = sol.value;
      for (size_t r = 0; r < rows.size(); ++r) {
        if (sol.pick[r] >= 0) out.choice[rows.job[r]] = rows.row_begin(r)[sol.pick[r]].orig;
      }
    } else {
      out.exact = true;
      out.method = "trivial";
    }
  } else {
    out = mckp_internal::SolveMultiType(problem, settings, start);
  }
  out.bound = std::max(out.bound, out.objective);
  out.solve_ms = MsSince(start);
  return out;
}

double MckpLpBound(const MckpProblem& problem) {
  mckp_internal::CheckInput(problem);
  if (problem.capacity.size() != 1) {
    throw Error(ErrorKind::kInvalidArgument, "MckpLpBound: exactly one GPU type expected");
  }
  Rows rows = BuildRows(problem, 0, problem.capacity[0], nullptr);
  return mckp_internal::SolveLp(rows, problem.capacity[0]).bound;
}

}  // namespace elastic::optimizer
