// `elastic-optimize bench`: one JSON line per (instance size, policy) with the median solve
// time, the objective, the certified gap (dp) and the gap to the best known objective.
#include <algorithm>
#include <cmath>
#include <boost/program_options.hpp>
#include <iostream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "elastic/common/cli_options.h"
#include "elastic/optimizer/cbc_oracle.h"
#include "elastic/optimizer/instances.h"
#include "elastic/optimizer/policy.h"
#include "../src/internal.h"

namespace elastic::optimizer::cli {

namespace po = boost::program_options;

namespace {

// Every policy of the table, comma-separated.
std::string DefaultPolicies() {
  std::string list;
  for (const std::string& name : PolicyNames()) list += (list.empty() ? "" : ",") + name;
  return list;
}

struct BenchOptions {
  std::string sizes = "160x64,1000x2048,10000x16384,1000x2048x3";
  std::string policies = DefaultPolicies();
  int repeats = 5;
  uint64_t seed = 42;
  double time_budget_ms = 1000.0;
  bool cbc = false;
  double cbc_time_limit_s = 120.0;
};

po::options_description SetupBench(BenchOptions& o) {
  po::options_description d(
      "Usage: elastic-optimize bench [options]\n\n"
      "Random instances (fixed seed, option tables from concave speedup curves); prints one JSON\n"
      "line per size and policy: median solve time, objective, certified gap (dp) and gap to the\n"
      "best objective known for the instance (over all policies and cbc).\n\nOptions");
  d.add_options()
      ("help,h", "show this help")
      ("sizes", po::value(&o.sizes)->default_value(o.sizes), "JOBSxGPUS[xTYPES],... instance sizes")
      ("policies", po::value(&o.policies)->default_value(o.policies), "comma-separated policy names")
      ("repeats", po::value(&o.repeats)->default_value(o.repeats), "solves per policy (median reported)")
      ("seed", po::value(&o.seed)->default_value(o.seed), "instance seed")
      ("time-budget-ms", po::value(&o.time_budget_ms)->default_value(o.time_budget_ms), "policy time budget")
      ("cbc", po::bool_switch(&o.cbc), "also solve each instance with the cbc binary (coinor-cbc)")
      ("cbc-time-limit", po::value(&o.cbc_time_limit_s)->default_value(o.cbc_time_limit_s), "cbc limit [s]");
  return d;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool ParseSize(const std::string& s, InstanceSpec& spec) {
  const std::vector<std::string> parts = Split(s, 'x');
  if (parts.size() < 2 || parts.size() > 3) return false;
  try {
    spec.jobs = std::stoi(parts[0]);
    spec.gpus = std::stoi(parts[1]);
    spec.types = parts.size() == 3 ? std::stoi(parts[2]) : 1;
  } catch (const std::exception&) {
    return false;
  }
  return spec.jobs > 0 && spec.gpus > 0 && spec.types >= 1 && spec.types <= 4;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int RunBench(const std::vector<std::string>& args) {
  BenchOptions o;
  po::options_description desc = SetupBench(o);
  po::variables_map vm;
  const elastic::cli::Prologue prologue{"elastic-optimize bench", " (see --help)\n", "", "\n"};
  if (std::optional<int> done = elastic::cli::ParseCommandLine(args, desc, vm, prologue)) return *done;
  if (o.repeats < 1) {
    std::cerr << "elastic-optimize bench: --repeats must be >= 1\n";
    return kExitUsage;
  }
  std::vector<std::unique_ptr<Policy>> policies;
  for (const std::string& name : Split(o.policies, ',')) {
    Result<std::unique_ptr<Policy>> p = MakePolicy(name);
    if (!p.ok()) {
      std::cerr << "elastic-optimize bench: " << p.status().message() << "\n";
      return kExitUsage;
    }
    policies.push_back(std::move(p).value());
  }
  for (const std::string& size : Split(o.sizes, ',')) {
    InstanceSpec spec;
    spec.seed = o.seed;
    if (!ParseSize(size, spec)) {
      std::cerr << "elastic-optimize bench: bad size '" << size << "' (expected JOBSxGPUS or JOBSxGPUSxTYPES)\n";
      return kExitUsage;
    }
    const Snapshot snap = RandomInstance(spec);
    PolicyOptions popts;
    popts.time_budget_ms = o.time_budget_ms;
    popts.place = false;  // time the optimisation itself
    std::vector<nlohmann::json> lines;
    double best = -std::numeric_limits<double>::infinity();
    double dp_ms = 0.0;
    for (const auto& policy : policies) {
      std::vector<double> ms;
      Plan plan;
      for (int r = 0; r < o.repeats; ++r) {
        Result<Plan> res = policy->Solve(snap, popts);
        if (!res.ok()) {
          std::cerr << "elastic-optimize bench: " << policy->name() << ": " << res.status().message() << "\n";
          return kExitFailure;
        }
        plan = std::move(res).value();
        ms.push_back(plan.solve_ms);
        if (Status st = CheckPlan(snap, plan); !st.ok()) {
          std::cerr << "elastic-optimize bench: " << policy->name() << " produced an invalid plan: " << st.message() << "\n";
          return kExitFailure;
        }
      }
      // Every policy is scored on the bench objective (pollux optimises the power mean).
      const double objective = EvaluatePlan(snap, plan, popts.objective);
      best = std::max(best, objective);
      nlohmann::json line = {{"size", size}, {"jobs", spec.jobs}, {"gpus", snap.cluster.TotalGpus()},
                             {"types", spec.types}, {"policy", std::string(policy->name())},
                             {"method", plan.method}, {"median_ms", Median(ms)}, {"objective", objective},
                             {"exact", plan.exact}};
      if (std::abs(objective - plan.objective) > 1e-9 * std::max(1.0, std::abs(objective))) {
        line["policy_objective"] = plan.objective;  // its own objective's value
      }
      if (std::isfinite(plan.bound)) {
        line["bound"] = plan.bound;
        line["certified_gap"] = plan.gap;
      }
      if (policy->name() == "dp") dp_ms = Median(ms);
      lines.push_back(line);
    }
    if (o.cbc) {
      Result<internal::Tables> tables = internal::PrepareTables(snap, popts.objective);
      const MckpProblem problem = internal::ToMckp(snap, tables.value());
      Result<CbcResult> cbc = SolveWithCbc(problem, o.cbc_time_limit_s);
      if (!cbc.ok()) {
        std::cerr << "elastic-optimize bench: " << cbc.status().message() << "\n";
        return kExitFailure;
      }
      best = std::max(best, cbc.value().objective);
      lines.push_back({{"size", size}, {"jobs", spec.jobs}, {"gpus", snap.cluster.TotalGpus()},
                       {"types", spec.types}, {"policy", "cbc"}, {"median_ms", cbc.value().wall_ms},
                       {"objective", cbc.value().objective}, {"exact", cbc.value().optimal}});
      for (auto& line : lines) {
        if (line["policy"] == "dp" && dp_ms > 0.0) line["speedup_vs_cbc"] = cbc.value().wall_ms / dp_ms;
      }
    }
    for (auto& line : lines) {
      const double obj = line["objective"].get<double>();
      line["gap_to_best"] = best != 0.0 ? (best - obj) / std::abs(best) : 0.0;
      std::cout << line.dump() << std::endl;
    }
  }
  return kExitOk;
}

}  // namespace elastic::optimizer::cli
