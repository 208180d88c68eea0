// Helpers shared by the policy implementations (not part of the public interface).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "elastic/optimizer/mckp.h"
#include "elastic/optimizer/model.h"
#include "elastic/optimizer/policy.h"

namespace elastic::optimizer::internal {

// A snapshot's option tables and each option's value under the objective.
struct Tables {
  std::vector<std::vector<Option>> options;
  std::vector<std::vector<double>> values;
  // Per job: a constant added to every option's value so that the search never leaves the
  // job pending (keep_running); subtracted again when a plan's objective is computed.
  std::vector<double> bonus;
};

// kInvalidArgument when the objective's parameters are out of range.
Status CheckObjective(const Objective& objective);

// Validates the snapshot and builds its tables (kInvalidArgument on a bad snapshot).
// With keep_running, every running job's options carry a bonus larger than the sum of all
// other values, so a plan keeps every running job that fits.
Result<Tables> PrepareTables(const Snapshot& snapshot, const Objective& objective, bool keep_running = false);

// The plan for one choice per job (index into its options, -1 pending): assignments and
// objective; bound/gap default to "nothing proven" (+inf) until the caller sets them.
Plan MakePlan(const Snapshot& snapshot, const Tables& tables, const std::vector<int>& choice,
              std::string policy_name);

// The MCKP of a snapshot: one item per option with value > 0 on a type with capacity.
MckpProblem ToMckp(const Snapshot& snapshot, const Tables& tables);

// Finishes a plan: gap from objective and bound, placement when asked, solve time.
Status Finish(const Snapshot& snapshot, const PolicyOptions& options,
              std::chrono::steady_clock::time_point start, Plan& plan);

double MsSince(std::chrono::steady_clock::time_point start);

}  // namespace elastic::optimizer::internal
