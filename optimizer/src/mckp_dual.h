// The Lagrangian dual of the several-types MCKP (internal to optimizer/; mckp.h is the interface).
//
// Relaxing the per-type capacities with multipliers lambda >= 0 gives
//   L(lambda) = sum_t lambda_t C_t + sum_j max(0, max_i v_i - lambda_{t_i} w_i),
// an upper bound on the optimum for every lambda >= 0 (each job's choice is relaxed on its own).
// L is convex and piecewise linear; its minimum equals the LP relaxation's optimum (a job's
// "at most one item" polytope is integral). A subgradient is C - D(lambda), D_t the GPUs of
// type t that the jobs' best choices demand.
#pragma once

#include <vector>

#include "elastic/optimizer/mckp.h"
#include "mckp_rows.h"

namespace elastic::optimizer::mckp_internal {

struct DualSolution {
  std::vector<double> lambda;  // the multipliers of the lowest L found
  double bound = 0.0;          // L(lambda): a certified upper bound on the optimum
  int newton_steps = 0;        // accepted Newton steps
  int coordinate_rounds = 0;   // rounds of the coordinate descent that polishes
};

// Minimises L within `budget_ms` (measured from `start`): a scalar bisection for a starting
// point, damped Newton steps on D(lambda) = C with a finite-difference Jacobian (the many jobs
// of a large instance make D nearly smooth; from 32,768 jobs the first steps run on a sample),
// then, where Newton stalls (few jobs: D is a coarse staircase), cyclic coordinate descent with
// exact 1-D minimisation and Newton again. The first 4 Newton iterations run even past the
// budget. The bound returned is L evaluated over all jobs at the multipliers returned.
DualSolution MinimiseDual(const MckpProblem& p, double budget_ms, Clock::time_point start);

}  // namespace elastic::optimizer::mckp_internal
