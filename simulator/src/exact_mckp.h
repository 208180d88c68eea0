// A multiple-choice knapsack solved to proven optimality through the optimizer's public API: its
// MCKP solver (SolveMckp) first; when that solver cannot prove its plan optimal (several GPU
// types: a Lagrangian bound with a gap), the CBC integer-programming oracle (SolveWithCbc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/optimizer/mckp.h"

namespace elastic::simulator {

struct ExactMckp {
  std::vector<int32_t> choice;  // per job: item index or -1
  double objective = 0.0;
  bool by_cbc = false;  // the MCKP solver's plan was not proven optimal; CBC proved the optimum (its plan is used unless the MCKP plan is as good within CBC's tolerance)
  bool proven = true;   // false: CBC was needed and failed; the MCKP solver's plan (with its gap)
  std::string cbc_error;  // why CBC failed
};

// Never fails for a well-formed problem: when CBC is needed and fails (not installed, or it
// crashed) the MCKP solver's plan is returned with proven = false and the reason.
Result<ExactMckp> SolveMckpExactly(const optimizer::MckpProblem& problem, double time_budget_ms);

}  // namespace elastic::simulator
