#include "exact_mckp.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "elastic/optimizer/cbc_oracle.h"

namespace elastic::simulator {

Result<ExactMckp> SolveMckpExactly(const optimizer::MckpProblem& problem, double time_budget_ms) {
  namespace opt = elastic::optimizer;
  opt::MckpSettings settings;
  settings.time_budget_ms = time_budget_ms;
  const opt::MckpSolution m = opt::SolveMckp(problem, settings);
  ExactMckp out;
  out.choice = m.choice;
  out.objective = m.objective;
  if (m.exact || m.bound - m.objective <= 1e-9 * std::max(1.0, std::abs(m.bound))) return out;
  Result<opt::CbcResult> c = opt::SolveWithCbc(problem, 60.0);
  if (!c.ok() || !c.value().optimal) {
    out.proven = false;
    out.cbc_error = c.ok() ? "CBC did not prove its plan optimal within 60 s" : c.status().message();
    return out;
  }
  out.by_cbc = true;
  if (c.value().objective >= m.objective) {
    out.choice = c.value().choice;
    out.objective = c.value().objective;
  }
  return out;
}

}  // namespace elastic::simulator
