// An independent oracle for tests and benchmarks: solves an MCKP as an integer program with
// the `cbc` binary (Debian coinor-cbc). Not used by any policy.
#pragma once

#include <string>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/optimizer/mckp.h"

namespace elastic::optimizer {

struct CbcResult {
  bool optimal = false;         // cbc proved optimality (else it hit the time limit)
  double objective = 0.0;       // recomputed from the chosen items
  std::vector<int32_t> choice;  // per job: item index or -1
  double wall_ms = 0.0;         // wall time of the cbc process, file I/O included
};

// Writes the problem as an LP file into a fresh temporary directory, runs
// `cbc FILE sec LIMIT ratioGap 0 allowableGap 1e-9 threads 1 solve solu SOL` and reads the
// solution back. kUnavailable when the cbc binary cannot be run, kInternal when its output
// cannot be read.
Result<CbcResult> SolveWithCbc(const MckpProblem& problem, double time_limit_s = 60.0);

// The optimum of the problem's LP relaxation (every x in [0, 1]; the job rows bound it), which
// the Lagrangian dual's minimum equals: `cbc FILE sec LIMIT initialSolve solu SOL` on the same
// file without its Binary section. Errors as SolveWithCbc; kInternal when cbc reports no optimum.
Result<double> SolveLpRelaxationWithCbc(const MckpProblem& problem, double time_limit_s = 60.0);

}  // namespace elastic::optimizer
