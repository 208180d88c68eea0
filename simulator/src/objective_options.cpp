#include "objective_options.h"

namespace elastic::simulator::internal {

Status ApplyObjectiveOptions(const std::string& kind, double p, double pending_penalty,
                             const optimizer::Cluster& cluster, optimizer::Objective* objective) {
  if (!kind.empty()) {
    Result<optimizer::ObjectiveKind> k = optimizer::ParseObjectiveKind(kind);
    if (!k.ok()) return k.status();
    objective->kind = k.value();
  }
  objective->p = p;
  if (pending_penalty > 0.0) objective->pending_penalty = pending_penalty;
  if (pending_penalty < 0.0) objective->pending_penalty = optimizer::PolluxPendingPenalty(cluster);
  return Status::Ok();
}

bool KeepsRunningJobs(int keep_running, const std::string& policy) {
  return keep_running < 0 ? policy != "pollux" : keep_running != 0;
}

}  // namespace elastic::simulator::internal
