// Policies: given a snapshot, choose every job's configuration (or pending) for one epoch.
// Selectable by name: the table of policy_table.cpp (PolicyTable()) is the one list of them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/optimizer/model.h"

namespace elastic::optimizer {

enum class ObjectiveKind {
  kWeightedSum,  // sum_j weight_j * utility_j (pending: 0)
  kPowerMean,    // fairness: sum_j weight_j * (pending_penalty - utility_j^p), p < 0 (Sia)
};

// A separable objective: the value of a plan is the sum over jobs of JobValue(); a pending
// job is worth 0, so every option worth <= 0 is never better than waiting.
struct Objective {
  ObjectiveKind kind = ObjectiveKind::kWeightedSum;
  double p = -1.0;  // power-mean exponent, < 0
  // Sia's lambda: what leaving a job pending costs under the power mean, in units of
  // utility^p (a job at its base configuration has utility 1, hence 1^p = 1). Must be > 0.
  double pending_penalty = 1.1;
  // Rescale penalty (Pollux): a running job moved to any other configuration has its utility
  // multiplied by max(0, (age - rescales * rescale_cost_s) / (age + rescale_cost_s)).
  // 0 disables the penalty.
  double rescale_cost_s = 0.0;
  // Remaining-time penalty as well (when > 0, for jobs whose remaining_s is known): a change to
  // an option of utility u, which leaves the job rest = remaining_s / u seconds to run, has its
  // utility multiplied by rest / (rest + rescale_payback * rescale_cost_s) on top of Pollux's
  // factor: the change must save rescale_payback times its cost over the job's remaining run,
  // and a job rescaled often for its age is held (the history factor). 0: Pollux's form alone.
  double rescale_payback = 0.0;
  // Remaining-time weights (for jobs whose remaining_s is known): the job's value is multiplied
  // by (3600 / remaining_s)^srpt_exponent, remaining_s clamped to [60 s, 10^7 s]. 1: Smith's rule (shortest remaining time
  // first, for average JCT); 0.5: tempered; 0: off; -1: Optimus's weighting (with the power
  // mean p = -1, a job's marginal value is the reduction of its remaining time).
  double srpt_exponent = 0.0;
};

// The remaining time the weights use is clamped to [kMinRemainingS, kMaxRemainingS]; objectives
// need |srpt_exponent| <= kMaxSrptExponent and 0 <= rescale_payback <= kMaxRescalePayback.
inline constexpr double kMinRemainingS = 60.0;
inline constexpr double kMaxRemainingS = 1e7;
inline constexpr double kMaxSrptExponent = 2.0;
inline constexpr double kMaxRescalePayback = 1000.0;

// What a change of configuration leaves of a job's utility `utility` when one costs `cost_s`
// (the rescale penalty of Objective: Pollux's factor, times the remaining-time factor when
// rescale_payback > 0 and the job's remaining_s is known); 1 when cost_s <= 0. OptionValue
// applies it with rescale_cost_s; callers with a cost per job (the simulator) with theirs.
double RescaleFactor(const Objective& objective, const Job& job, double utility, double cost_s);

// What a job left without GPUs costs in Pollux's power mean, relative to a job at its base size:
// Pollux floors a speedup at 1e-3 in units where one GPU of a node with G GPUs is worth 1/G, so
// 1000 / G (250 on 4-GPU nodes; G: the largest node of the cluster). The pollux policy uses it.
double PolluxPendingPenalty(const Cluster& cluster);

// Parses "sum" / "weighted-sum" and "power-mean"; nullopt-like failure as Status.
Result<ObjectiveKind> ParseObjectiveKind(std::string_view name);
std::string_view ObjectiveKindName(ObjectiveKind kind) noexcept;

// The objective's value of giving `option` to `job` (before any policy-specific search).
double OptionValue(const Objective& objective, const Job& job, const Option& option);

// The value of a plan's assignments under `objective` (policies that optimise another
// objective, like pollux, are compared on a common one this way). The plan must follow the
// snapshot's job order.
double EvaluatePlan(const Snapshot& snapshot, const Plan& plan, const Objective& objective);

struct PolicyOptions {
  Objective objective;
  double time_budget_ms = 1000.0;  // wall-clock budget of one solve
  uint64_t seed = 1;               // randomised policies (evolutionary, pollux)
  bool place = true;               // also map GPU counts onto nodes (placement.h)
  // Running jobs are never left pending (their base size is guaranteed while it fits): the
  // controller's setting, since shrinking below min_gpus means preemption. Off by default so
  // that the plain option-table problem keeps its textbook semantics.
  bool keep_running = false;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const noexcept = 0;
  // Solves one epoch. Invalid snapshots give kInvalidArgument. The plan's assignments follow
  // the snapshot's job order; objective/bound/gap are under options.objective.
  virtual Result<Plan> Solve(const Snapshot& snapshot, const PolicyOptions& options) const = 0;
};

// One row of the policy table: a policy's name, its factory and one line saying what it does.
// Adding a policy is its own file under src/policies/ plus one row in src/policy_table.cpp.
struct PolicyEntry {
  std::string_view name;
  std::unique_ptr<Policy> (*make)();
  std::string_view help;
};

// Every policy, in a stable order (the order of every list of names shown to users).
std::span<const PolicyEntry> PolicyTable();
// Every policy's name, in the table's order.
const std::vector<std::string>& PolicyNames();
// The names joined with ", " ("dp, greedy, ..."), as help texts and error messages list them.
std::string PolicyNameList();
// The policy called `name`, or kNotFound listing the known names.
Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name);

// Each job's option table: its explicit options, else options generated from its goodput
// model (goodput.h). Options on types the cluster lacks or with zero capacity are dropped.
Result<std::vector<std::vector<Option>>> BuildOptionTables(const Snapshot& snapshot);

}  // namespace elastic::optimizer
