#include <algorithm>
#include <cmath>

#include "elastic/optimizer/policy.h"

namespace elastic::optimizer {

Result<ObjectiveKind> ParseObjectiveKind(std::string_view name) {
  if (name == "sum" || name == "weighted-sum") return ObjectiveKind::kWeightedSum;
  if (name == "power-mean") return ObjectiveKind::kPowerMean;
  return Status(ErrorKind::kInvalidArgument,
                "unknown objective '" + std::string(name) + "' (expected weighted-sum or power-mean)");
}

std::string_view ObjectiveKindName(ObjectiveKind kind) noexcept {
  return kind == ObjectiveKind::kPowerMean ? "power-mean" : "weighted-sum";
}

double PolluxPendingPenalty(const Cluster& cluster) {
  int gpus_per_node = 1;
  for (const GpuType& t : cluster.types) gpus_per_node = std::max(gpus_per_node, t.gpus_per_node);
  return 1000.0 / gpus_per_node;
}

double RescaleFactor(const Objective& objective, const Job& job, double utility, double cost_s) {
  if (!(cost_s > 0.0)) return 1.0;
  const double history = std::max(0.0, (job.age_s - job.rescales * cost_s) / (job.age_s + cost_s));
  if (!(objective.rescale_payback > 0.0 && job.remaining_s > 0.0)) return history;
  if (!(utility > 0.0)) return 0.0;
  // rest / (rest + payback * cost) with rest = remaining_s / u, written so it cannot overflow.
  return job.remaining_s / (job.remaining_s + objective.rescale_payback * cost_s * utility) * history;
}

double OptionValue(const Objective& objective, const Job& job, const Option& option) {
  double u = option.utility;
  if (objective.rescale_cost_s > 0.0 && job.current) {
    const Configuration& cur = *job.current;
    const bool same = cur.gpu_type == option.gpu_type && cur.gpus == option.gpus &&
                      (option.batch == 0 || cur.batch == option.batch);
    if (!same) u *= RescaleFactor(objective, job, u, objective.rescale_cost_s);
  }
  double weight = job.weight;
  if (objective.srpt_exponent != 0.0 && job.remaining_s > 0.0) {
    // Between a minute and 10^7 s (116 days): weights stay within 2^(2 x 17) of each other, which
    // keeps every value summable in a double (the DP adds them).
    weight *= std::pow(3600.0 / std::clamp(job.remaining_s, kMinRemainingS, kMaxRemainingS), objective.srpt_exponent);
  }
  if (objective.kind == ObjectiveKind::kWeightedSum) return weight * u;
  // Power mean (p < 0): minimising sum_j w_j u_j^p with u^p := pending_penalty for a pending
  // job equals maximising sum_j w_j (pending_penalty - u_j^p) with pending worth 0.
  if (u <= 0.0) return 0.0;
  return weight * (objective.pending_penalty - std::pow(u, objective.p));
}

double EvaluatePlan(const Snapshot& snapshot, const Plan& plan, const Objective& objective) {
  double v = 0.0;
  for (size_t j = 0; j < plan.assignments.size() && j < snapshot.jobs.size(); ++j) {
    const Assignment& a = plan.assignments[j];
    if (a.pending) continue;
    v += std::max(0.0, OptionValue(objective, snapshot.jobs[j], {a.gpu_type, a.gpus, a.batch, a.utility}));
  }
  return v;
}

}  // namespace elastic::optimizer
