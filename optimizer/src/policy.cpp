#include "elastic/optimizer/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "elastic/optimizer/goodput.h"
#include "elastic/optimizer/placement.h"
#include "internal.h"

namespace elastic::optimizer {

Result<std::vector<std::vector<Option>>> BuildOptionTables(const Snapshot& snapshot) {
  std::vector<std::vector<Option>> tables;
  tables.reserve(snapshot.jobs.size());
  for (const Job& job : snapshot.jobs) {
    std::vector<Option> opts;
    if (!job.options.empty()) {
      opts = job.options;
    } else if (job.model) {
      Result<std::vector<Option>> gen = GenerateOptions(job, snapshot.cluster);
      if (!gen.ok()) return gen.status();
      opts = std::move(gen).value();
    }
    // Drop options no epoch could grant (unknown type, more GPUs than the type has).
    std::erase_if(opts, [&](const Option& o) {
      const int t = snapshot.cluster.TypeIndex(o.gpu_type);
      return t < 0 || o.gpus > snapshot.cluster.types[static_cast<size_t>(t)].capacity();
    });
    tables.push_back(std::move(opts));
  }
  return tables;
}

namespace internal {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Status CheckObjective(const Objective& objective) {
  if (objective.kind == ObjectiveKind::kPowerMean && !(objective.p < 0.0)) {
    return Status(ErrorKind::kInvalidArgument, "power-mean objective needs p < 0");
  }
  if (!(objective.pending_penalty > 0.0) || !std::isfinite(objective.pending_penalty) ||
      !(objective.rescale_cost_s >= 0.0) || !std::isfinite(objective.rescale_cost_s) ||
      !(objective.rescale_payback >= 0.0 && objective.rescale_payback <= kMaxRescalePayback) ||
      !(std::abs(objective.srpt_exponent) <= kMaxSrptExponent)) {
    return Status(ErrorKind::kInvalidArgument,
                  "objective needs finite pending_penalty > 0 and rescale_cost_s >= 0, rescale_payback in [0, 1000] "
                  "and |srpt_exponent| <= 2");
  }
  return Status::Ok();
}

Result<Tables> PrepareTables(const Snapshot& snapshot, const Objective& objective, bool keep_running) {
  if (Status st = Validate(snapshot); !st.ok()) return st;
  if (Status st = CheckObjective(objective); !st.ok()) return st;
  Result<std::vector<std::vector<Option>>> opts = BuildOptionTables(snapshot);
  if (!opts.ok()) return opts.status();
  Tables t;
  t.options = std::move(opts).value();
  t.values.resize(t.options.size());
  for (size_t j = 0; j < t.options.size(); ++j) {
    for (const Option& o : t.options[j]) t.values[j].push_back(OptionValue(objective, snapshot.jobs[j], o));
  }
  t.bonus.assign(t.options.size(), 0.0);
  if (keep_running) {
    double total = 1.0;
    for (const auto& vs : t.values) {
      double best = 0.0;
      for (double v : vs) best = std::max(best, v);
      total += best;
    }
    for (size_t j = 0; j < t.options.size(); ++j) {
      if (snapshot.jobs[j].state != JobState::kRunning) continue;
      t.bonus[j] = total;
      for (double& v : t.values[j]) v = std::max(v, 0.0) + total;
    }
  }
  return t;
}

Plan MakePlan(const Snapshot& snapshot, const Tables& tables, const std::vector<int>& choice,
              std::string policy_name) {
  Plan plan;
  plan.policy = std::move(policy_name);
  plan.bound = std::numeric_limits<double>::infinity();
  plan.assignments.reserve(snapshot.jobs.size());
  for (size_t j = 0; j < snapshot.jobs.size(); ++j) {
    Assignment a;
    a.job_id = snapshot.jobs[j].id;
    if (choice[j] >= 0) {
      const Option& o = tables.options[j][static_cast<size_t>(choice[j])];
      a.pending = false;
      a.gpu_type = o.gpu_type;
      a.gpus = o.gpus;
      a.batch = o.batch;
      a.utility = o.utility;
      plan.objective += tables.values[j][static_cast<size_t>(choice[j])] - tables.bonus[j];
    }
    plan.assignments.push_back(std::move(a));
  }
  return plan;
}

MckpProblem ToMckp(const Snapshot& snapshot, const Tables& tables) {
  MckpProblem p;
  for (const GpuType& t : snapshot.cluster.types) p.capacity.push_back(t.capacity());
  p.items.reserve(tables.options.size() * 8);
  p.job_begin.reserve(tables.options.size() + 1);
  for (size_t j = 0; j < tables.options.size(); ++j) {
    for (size_t k = 0; k < tables.options[j].size(); ++k) {
      const Option& o = tables.options[j][k];
      p.items.push_back({snapshot.cluster.TypeIndex(o.gpu_type), o.gpus, tables.values[j][k]});
    }
    p.job_begin.push_back(static_cast<uint32_t>(p.items.size()));
  }
  return p;
}

Status Finish(const Snapshot& snapshot, const PolicyOptions& options,
              std::chrono::steady_clock::time_point start, Plan& plan) {
  if (std::isfinite(plan.bound)) {
    plan.bound = std::max(plan.bound, plan.objective);
    plan.gap = plan.bound != 0.0 ? (plan.bound - plan.objective) / std::abs(plan.bound) : 0.0;
  } else {
    plan.gap = std::numeric_limits<double>::infinity();
  }
  plan.solve_ms = MsSince(start);
  if (options.place) {
    if (Status st = Place(snapshot.cluster, plan); !st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace internal
}  // namespace elastic::optimizer
