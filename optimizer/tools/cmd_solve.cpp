// `elastic-optimize --policy NAME --input snapshot.json`: prints the plan as JSON.
#include <boost/program_options.hpp>
#include <cmath>
#include <iostream>

#include "commands.h"
#include "elastic/common/cli_options.h"
#include "elastic/optimizer/policy.h"
#include "elastic/optimizer/snapshot_json.h"

namespace elastic::optimizer::cli {

namespace po = boost::program_options;

namespace {

struct SolveOptions {
  std::string policy = "dp";
  std::string input;
  std::string objective = "weighted-sum";
  double p = -1.0;
  double pending_penalty = 1.1;
  double rescale_cost_s = 0.0;
  double rescale_payback = 0.0;
  double srpt_exponent = 0.0;
  double time_budget_ms = 1000.0;
  uint64_t seed = 1;
  bool no_placement = false;
  bool pretty = false;
  bool keep_running = false;
};

po::options_description SetupSolve(SolveOptions& o) {
  po::options_description d(
      "Usage: elastic-optimize --input FILE [options]\n"
      "       elastic-optimize bench [options]   (see elastic-optimize bench --help)\n\n"
      "Solves one scheduling epoch: reads a snapshot (cluster + jobs, JSON; '-' for stdin) and\n"
      "writes the plan as JSON to standard output. Exit codes: 0 ok, 1 internal error,\n"
      "2 bad command line, 3 bad input.\n\nOptions");
  d.add_options()
      ("help,h", "show this help")
      ("policy", po::value(&o.policy)->default_value(o.policy), PolicyNameList().c_str())
      ("input,i", po::value(&o.input), "snapshot JSON file ('-' reads standard input)")
      ("objective", po::value(&o.objective)->default_value(o.objective), "weighted-sum or power-mean")
      ("p", po::value(&o.p)->default_value(o.p), "power-mean exponent (< 0)")
      ("pending-penalty", po::value(&o.pending_penalty)->default_value(o.pending_penalty),
       "power mean: cost of a pending job in units of utility^p (Sia's lambda)")
      ("rescale-cost", po::value(&o.rescale_cost_s)->default_value(o.rescale_cost_s),
       "seconds one rescale costs; > 0 enables the rescale penalty")
      ("rescale-payback", po::value(&o.rescale_payback)->default_value(o.rescale_payback),
       "> 0: penalise a rescale on the job's remaining_s (it must save this many times its cost) instead of its age")
      ("srpt-exponent", po::value(&o.srpt_exponent)->default_value(o.srpt_exponent),
       "multiply each value by (3600 / remaining_s)^X for jobs with remaining_s, clamped to [60 s, 1e7 s] "
       "(1: Smith's rule), |X| <= 2")
      ("time-budget-ms", po::value(&o.time_budget_ms)->default_value(o.time_budget_ms), "solve time budget")
      ("seed", po::value(&o.seed)->default_value(o.seed), "seed of randomised policies")
      ("no-placement", po::bool_switch(&o.no_placement), "do not map GPU counts onto nodes")
      ("keep-running", po::bool_switch(&o.keep_running), "never leave a running job pending")
      ("pretty", po::bool_switch(&o.pretty), "indent the JSON output");
  return d;
}

}  // namespace

int RunSolve(const std::vector<std::string>& args) {
  SolveOptions o;
  po::options_description desc = SetupSolve(o);
  const elastic::cli::Prologue prologue{"elastic-optimize", " (see --help)\n", "", "\n"};
  po::variables_map vm;
  if (std::optional<int> done = elastic::cli::ParseCommandLine(args, desc, vm, prologue)) return *done;
  if (o.input.empty()) return elastic::cli::UsageError(prologue, "--input is required");
  Result<std::unique_ptr<Policy>> policy = MakePolicy(o.policy);
  if (!policy.ok()) {
    std::cerr << "elastic-optimize: " << policy.status().message() << "\n";
    return kExitUsage;
  }
  PolicyOptions popts;
  Result<ObjectiveKind> kind = ParseObjectiveKind(o.objective);
  if (!kind.ok()) {
    std::cerr << "elastic-optimize: " << kind.status().message() << "\n";
    return kExitUsage;
  }
  popts.objective.kind = kind.value();
  popts.objective.p = o.p;
  popts.objective.pending_penalty = o.pending_penalty;
  popts.objective.rescale_cost_s = o.rescale_cost_s;
  popts.objective.rescale_payback = o.rescale_payback;
  popts.objective.srpt_exponent = o.srpt_exponent;
  if (!(o.p < 0.0) || !(o.pending_penalty > 0.0) || !std::isfinite(o.pending_penalty) || !(o.rescale_cost_s >= 0.0) ||
      !std::isfinite(o.rescale_cost_s) || !(o.rescale_payback >= 0.0 && o.rescale_payback <= kMaxRescalePayback) ||
      !(std::abs(o.srpt_exponent) <= kMaxSrptExponent) || !(o.time_budget_ms > 0.0)) {
    std::cerr << "elastic-optimize: need --p < 0, --pending-penalty > 0, --rescale-cost >= 0, --rescale-payback in "
                 "[0, 1000], |--srpt-exponent| <= 2, --time-budget-ms > 0\n";
    return kExitUsage;
  }
  popts.time_budget_ms = o.time_budget_ms;
  popts.seed = o.seed;
  popts.place = !o.no_placement;
  popts.keep_running = o.keep_running;

  Result<Snapshot> snap = LoadSnapshot(o.input);
  if (!snap.ok()) {
    std::cerr << "elastic-optimize: " << snap.status().message() << "\n";
    return kExitBadInput;
  }
  Result<Plan> plan = policy.value()->Solve(snap.value(), popts);
  if (!plan.ok()) {
    std::cerr << "elastic-optimize: " << plan.status().message() << "\n";
    return plan.status().kind() == ErrorKind::kInvalidArgument ? kExitBadInput : kExitFailure;
  }
  std::cout << PlanToJson(plan.value()).dump(o.pretty ? 2 : -1) << "\n";
  return kExitOk;
}

}  // namespace elastic::optimizer::cli
