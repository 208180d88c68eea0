// The policy table: the one list of the optimizer's policies. Every place that names them
// (elastic-optimize, elastic-sim, elasticd's scheduler.policy, error messages) reads it.
#include "elastic/optimizer/policy.h"

namespace elastic::optimizer {

// Each defined in its own file under policies/.
std::unique_ptr<Policy> MakeDpPolicy();
std::unique_ptr<Policy> MakeGreedyPolicy();
std::unique_ptr<Policy> MakeOptimusPolicy();
std::unique_ptr<Policy> MakeStaticPolicy();
std::unique_ptr<Policy> MakeEvolutionaryPolicy();
std::unique_ptr<Policy> MakePolluxPolicy();

namespace {

// The order is the one users see in every list of names and in "unknown policy" messages.
constexpr PolicyEntry kPolicies[] = {
    {"dp", MakeDpPolicy, "the multiple-choice knapsack, solved exactly or with a certified bound"},
    {"greedy", MakeGreedyPolicy, "repeatedly the upgrade with the most value gained per extra GPU"},
    {"optimus", MakeOptimusPolicy,
     "Optimus: GPU count only (type and batch frozen), each GPU to the job whose remaining time it shortens most"},
    {"static", MakeStaticPolicy, "no elasticity: the user's request, first come first served"},
    {"evolutionary", MakeEvolutionaryPolicy, "ONES-style genetic search, seeded with greedy"},
    {"pollux", MakePolluxPolicy, "Pollux-style genetic search on the power mean of speedups"},
};

}  // namespace

std::span<const PolicyEntry> PolicyTable() { return kPolicies; }

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const PolicyEntry& e : kPolicies) n.emplace_back(e.name);
    return n;
  }();
  return names;
}

std::string PolicyNameList() {
  std::string list;
  for (const PolicyEntry& e : kPolicies) list += (list.empty() ? "" : ", ") + std::string(e.name);
  return list;
}

Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name) {
  for (const PolicyEntry& e : kPolicies) {
    if (e.name == name) return e.make();
  }
  return Status(ErrorKind::kNotFound, "unknown policy '" + std::string(name) + "' (known: " + PolicyNameList() + ")");
}

}  // namespace elastic::optimizer
