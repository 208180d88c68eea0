#include "elastic/optimizer/model.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

namespace elastic::optimizer {

int Cluster::TypeIndex(const std::string& name) const noexcept {
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int Cluster::TotalGpus() const noexcept {
  int total = 0;
  for (const GpuType& t : types) total += t.capacity();
  return total;
}

bool Job::GpuCountAllowed(int gpus) const noexcept {
  return gpus >= min_gpus && gpus <= max_gpus && gpu_step > 0 && (gpus - min_gpus) % gpu_step == 0;
}

bool Job::TypeAllowed(const std::string& type) const noexcept {
  return allowed_types.empty() ||
         std::find(allowed_types.begin(), allowed_types.end(), type) != allowed_types.end();
}

namespace {

Status Invalid(const std::string& msg) { return Status(ErrorKind::kInvalidArgument, msg); }

// The batch checks of an option or assignment (batch 0: not specified, nothing to check).
Status CheckBatch(const Job& job, int gpus, int64_t batch, const std::string& what) {
  if (batch == 0) return Status::Ok();
  if (batch < job.min_batch || batch > job.max_batch) {
    return Invalid(what + ": batch " + std::to_string(batch) + " outside the job's global batch bounds [" +
                   std::to_string(job.min_batch) + ", " + std::to_string(job.max_batch) + "]");
  }
  // Local batch: batch / gpus per step, or split further into accumulation steps.
  const int64_t per_gpu_ceil = (batch + gpus - 1) / gpus;
  const int64_t per_gpu_floor = batch / gpus;
  if (per_gpu_floor < job.min_local_batch) {
    return Invalid(what + ": local batch " + std::to_string(per_gpu_floor) + " below the job's minimum " +
                   std::to_string(job.min_local_batch));
  }
  if (per_gpu_ceil > job.max_local_batch && !job.accumulation) {
    return Invalid(what + ": local batch " + std::to_string(per_gpu_ceil) + " above the job's maximum " +
                   std::to_string(job.max_local_batch) + " and gradient accumulation is not allowed");
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const Snapshot& s) {
  if (s.cluster.types.empty()) return Invalid("cluster: no GPU types");
  std::set<std::string> type_names;
  for (const GpuType& t : s.cluster.types) {
    if (t.name.empty()) return Invalid("cluster: a GPU type without a name");
    if (!type_names.insert(t.name).second) return Invalid("cluster: GPU type '" + t.name + "' listed twice");
    if (t.nodes < 0 || t.gpus_per_node < 1) {
      return Invalid("cluster: GPU type '" + t.name + "' needs nodes >= 0 and gpus_per_node >= 1");
    }
  }
  std::set<std::string> ids;
  for (const Job& j : s.jobs) {
    const std::string where = "job '" + j.id + "'";
    if (j.id.empty()) return Invalid("a job without an id");
    if (!ids.insert(j.id).second) return Invalid(where + ": id listed twice");
    if (!(j.weight > 0.0) || !std::isfinite(j.weight)) return Invalid(where + ": weight must be > 0");
    if (j.min_gpus < 1 || j.max_gpus < j.min_gpus) return Invalid(where + ": needs 1 <= min_gpus <= max_gpus");
    if (j.gpu_step < 1) return Invalid(where + ": gpu_step must be >= 1");
    if (!(j.remaining_s >= 0.0 && j.remaining_s <= kMaxRemainingInputS)) {
      return Invalid(where + ": remaining_s must be within [0, 1e9]");
    }
    if (j.min_batch < 1 || j.max_batch < j.min_batch) return Invalid(where + ": needs 1 <= min_batch <= max_batch");
    if (j.min_local_batch < 1 || j.max_local_batch < j.min_local_batch) {
      return Invalid(where + ": needs 1 <= min_local_batch <= max_local_batch");
    }
    for (const std::string& t : j.allowed_types) {
      if (s.cluster.TypeIndex(t) < 0) return Invalid(where + ": allowed GPU type '" + t + "' is not in the cluster");
    }
    if (j.state == JobState::kRunning && !j.current) return Invalid(where + ": running but no current configuration");
    if (j.current && s.cluster.TypeIndex(j.current->gpu_type) < 0) {
      return Invalid(where + ": current GPU type '" + j.current->gpu_type + "' is not in the cluster");
    }
    if (j.options.empty() && !j.model) return Invalid(where + ": needs an option table or a model");
    for (size_t i = 0; i < j.options.size(); ++i) {
      const Option& o = j.options[i];
      const std::string what = where + " option " + std::to_string(i);
      if (s.cluster.TypeIndex(o.gpu_type) < 0) return Invalid(what + ": GPU type '" + o.gpu_type + "' is not in the cluster");
      if (!j.TypeAllowed(o.gpu_type)) return Invalid(what + ": GPU type '" + o.gpu_type + "' is not allowed for the job");
      if (!j.GpuCountAllowed(o.gpus)) {
        return Invalid(what + ": " + std::to_string(o.gpus) + " GPUs is outside [min_gpus, max_gpus] or off gpu_step");
      }
      if (o.batch < 0) return Invalid(what + ": negative batch");
      if (!std::isfinite(o.utility)) return Invalid(what + ": utility is not a finite number");
      if (Status st = CheckBatch(j, o.gpus, o.batch, what); !st.ok()) return st;
    }
  }
  return Status::Ok();
}

Status CheckPlan(const Snapshot& s, const Plan& plan) {
  if (plan.assignments.size() != s.jobs.size()) {
    return Invalid("plan has " + std::to_string(plan.assignments.size()) + " assignments for " +
                   std::to_string(s.jobs.size()) + " jobs");
  }
  std::vector<int64_t> used(s.cluster.types.size(), 0);
  for (size_t i = 0; i < s.jobs.size(); ++i) {
    const Job& j = s.jobs[i];
    const Assignment& a = plan.assignments[i];
    const std::string where = "job '" + j.id + "'";
    if (a.job_id != j.id) return Invalid("assignment " + std::to_string(i) + " is for '" + a.job_id + "', not " + where);
    if (a.pending) continue;
    const int t = s.cluster.TypeIndex(a.gpu_type);
    if (t < 0) return Invalid(where + ": unknown GPU type '" + a.gpu_type + "'");
    if (!j.TypeAllowed(a.gpu_type)) return Invalid(where + ": GPU type '" + a.gpu_type + "' not allowed");
    if (!j.GpuCountAllowed(a.gpus)) return Invalid(where + ": " + std::to_string(a.gpus) + " GPUs violates min/max/step");
    if (Status st = CheckBatch(j, a.gpus, a.batch, where); !st.ok()) return st;
    used[static_cast<size_t>(t)] += a.gpus;
    if (!a.placement.empty()) {
      int placed = 0;
      for (const NodeSlice& ns : a.placement) {
        if (ns.node < 0 || ns.node >= s.cluster.types[static_cast<size_t>(t)].nodes) {
          return Invalid(where + ": placed on node " + std::to_string(ns.node) + " that does not exist");
        }
        placed += ns.gpus;
      }
      if (placed != a.gpus) return Invalid(where + ": placement holds " + std::to_string(placed) + " GPUs, not " + std::to_string(a.gpus));
    }
  }
  for (size_t t = 0; t < used.size(); ++t) {
    if (used[t] > s.cluster.types[t].capacity()) {
      return Invalid("GPU type '" + s.cluster.types[t].name + "': plan uses " + std::to_string(used[t]) +
                     " GPUs of " + std::to_string(s.cluster.types[t].capacity()));
    }
  }
  return Status::Ok();
}

}  // namespace elastic::optimizer
