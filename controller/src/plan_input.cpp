#include "plan_input.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "elastic/common/extension_link.h"
#include "elastic/optimizer/goodput.h"
#include "job_model.h"
#include "type_moves.h"

namespace elastic::controller {
namespace {

// The most GPUs the job may reach: its spec's maximum, within its account's cap on extension
// GPUs (`account_ext`: the account's extension GPUs now, the job's own included), never below
// what it holds or is about to hold (`planned`).
int MaxGpus(const ElasticJob& job, int planned, int account_ext, const ControllerConfig& config) {
  int max_gpus = static_cast<int>(job.Spec().GpusMax(job.base_gpus));
  int64_t cap = config.default_account_extension_gpus;
  if (auto it = config.account_extension_gpus.find(job.account); it != config.account_extension_gpus.end()) cap = it->second;
  if (cap >= 0) {
    int own_ext = planned - job.base_gpus;
    int others = account_ext - own_ext;
    max_gpus = std::min<int>(max_gpus, job.base_gpus + static_cast<int>(std::max<int64_t>(0, cap - others)));
  }
  return std::max(max_gpus, planned);
}

// The job's option table (JobOptions), cached in the job. Option tables change only with the
// job's model or bounds: reuse them for a minute. Inputs of the table: the bounds, the sizes
// measured (one size: the prior), the fit (its generation: a new fit, a new table), the batch, and
// the noise scale in 5% steps (the best batches move with it).
std::vector<optimizer::Option> CachedOptions(const ElasticJob& job, int max_gpus, int gpn, double now) {
  const double noise = job.efficiency ? NoiseScale(*job.efficiency) : 0.0;
  const int noise_key = std::isfinite(noise) && noise > 0 ? static_cast<int>(std::lround(20 * std::log(noise))) : -1;
  auto key = std::make_tuple(max_gpus, gpn, job.fit_generation, job.batch, noise_key, MeasuredSizes(job));
  if (job.options_cache && job.options_key == key && now - job.options_at < 60) return *job.options_cache;
  std::vector<optimizer::Option> options = JobOptions(job, max_gpus, gpn);
  job.options_cache = options;
  job.options_key = key;
  job.options_at = now;
  return options;
}

// Time left at the base size, for the remaining-time objective: the samples still to train at
// the speed of the last step-time sample, scaled from the current size (`planned`) to the base by
// the model. nullopt when unknown.
std::optional<double> TimeLeftAtBase(const ElasticJob& job, const std::vector<optimizer::Option>& options, int planned) {
  if (job.total_samples <= job.samples_done || job.samples.empty()) return std::nullopt;
  const optimizer::StepSample& last = job.samples.back();
  const double rate = last.gpus * last.local_batch / last.step_time;  // samples per second
  double u_now = 1.0;
  for (const auto& o : options) {
    if (o.gpus == planned && o.utility > 0) u_now = o.utility;
  }
  const double left = static_cast<double>(job.total_samples - job.samples_done) / rate * u_now;
  return std::clamp(left, 1.0, optimizer::kMaxRemainingInputS);  // > 0: known
}

// A job waiting for resources as demand at its requested size, on every type it may use.
optimizer::Job WaitingJob(const JobInfo& j, const std::map<std::string, int>& capacity, double pending_weight) {
  optimizer::Job oj;
  oj.id = "pending:" + std::to_string(j.id);
  oj.owner = j.user;
  oj.account = j.account;
  oj.state = optimizer::JobState::kPending;
  // Extensions use GPUs nobody waits for: a waiting job outweighs any extension's gain, so the
  // extensions in its way are released and Slurm can start it.
  oj.weight = pending_weight;
  oj.min_gpus = oj.max_gpus = j.gpus;
  for (const auto& [type, cap] : capacity) {
    if (!j.gpu_type.empty() && j.gpu_type != type) continue;
    oj.options.push_back({type, j.gpus, 0, 1.0});
  }
  return oj;
}

// Options on the other GPU types the job accepts (--elastic-gpu-types), at its base size: a move
// restarts it there. Their utility is that of the base size here times the job's speed there over
// its speed here (SpeedPerGpu: measured, else the site's relative speeds). Only a job whose GPU
// request is untyped can be moved (moves.cpp), only once it has reported a step, not while it
// backs off after a failed extension or move, and only to a type where the move pays back
// (CheckMove, recorded in `checks`): the plan never counts on a move elasticd would not make.
void AddOtherTypes(const ElasticJob& job, const JobInfo* info, const std::map<std::string, int>& capacity,
                   const ControllerConfig& config, double now, double move_cost_s, optimizer::Job& oj,
                   nlohmann::json& checks) {
  if (!config.type_moves || info == nullptr || !info->request_type.empty() || job.metrics_received == 0) return;
  if (now < job.grow_backoff_until) return;  // after a failed extension or move: not yet
  const auto here = SpeedPerGpu(job, job.gpu_type, config);
  if (!here || *here <= 0) return;
  double u_base = 0;
  int64_t batch = job.batch;
  for (const auto& o : oj.options) {
    if (o.gpus == job.base_gpus && o.gpu_type == job.gpu_type) {
      u_base = o.utility;
      if (o.batch > 0) batch = o.batch;
    }
  }
  if (u_base <= 0) return;
  for (const auto& type : OtherTypes(job)) {
    auto cap = capacity.find(type);
    const auto there = SpeedPerGpu(job, type, config);
    if (cap == capacity.end() || cap->second < job.base_gpus || !there) continue;
    const auto check = CheckMove(job, type, move_cost_s, config.move_payback, config, now);
    checks[type] = check ? check->ToJson() : nlohmann::json("time left or speed not known yet");
    if (!check || !check->worth) continue;
    oj.options.push_back({type, job.base_gpus, batch, u_base * *there / *here});
    oj.allowed_types.push_back(type);
  }
}

}  // namespace

PlanInput BuildPlanInput(const Registry& registry, const std::vector<NodeInfo>& nodes,
                         const std::vector<JobInfo>& sjobs, const ControllerConfig& config, bool paused_all,
                         double now, double move_cost_s) {
  PlanInput in;
  auto& capacity = in.capacity;
  auto& gpus_per_node = in.gpus_per_node;
  for (const auto& n : nodes) {
    in.node_by_name[n.name] = &n;
    for (const auto& t : n.Types()) {  // a node with several GPU types counts for each
      if (t.type.empty() || t.gpus == 0) continue;
      gpus_per_node[t.type] = std::max(gpus_per_node[t.type], t.gpus);
      if (n.usable) capacity[t.type] += t.gpus;
    }
  }
  std::set<uint32_t> extension_jobs;
  for (const auto& [id, e] : registry.extensions) extension_jobs.insert(e.slurm_job);
  std::map<uint32_t, const JobInfo*> info_by_id;
  for (const auto& j : sjobs) info_by_id[j.id] = &j;
  optimizer::Snapshot& snap = in.snap;
  std::map<std::string, int> account_ext;  // extension GPUs per account
  for (const auto& [id, e] : registry.extensions) account_ext[e.account] += e.gpus;
  // Rigid running jobs are fixed load; elastic jobs on unusable nodes keep what they hold.
  for (const auto& j : sjobs) {
    if (j.state != SlurmJobState::kRunning || j.gpus == 0 || extension_jobs.count(j.id) || registry.jobs.count(j.id)) continue;
    if (contract::IsExtensionComment(j.admin_comment)) continue;  // an extension (only admins set this)
    capacity[j.gpu_type] -= j.gpus;
  }
  for (const auto& [id, job] : registry.jobs) {
    optimizer::Job oj;
    oj.id = std::to_string(id);
    oj.owner = job.user;
    oj.account = job.account;
    oj.state = optimizer::JobState::kRunning;
    int planned = registry.PlannedGpus(job);
    oj.min_gpus = job.base_gpus;
    oj.gpu_step = static_cast<int>(job.Spec().GpuStep());
    oj.current = optimizer::Configuration{job.gpu_type, planned, job.batch};
    oj.age_s = now - job.registered_at;
    oj.rescales = job.rescales;
    bool in_flight = false;
    for (const auto& [eid, e] : registry.extensions) in_flight = in_flight || (e.parent == id && e.InFlight());
    // A set_batch not acknowledged (one the runtime ignored for ready_timeout no longer counts).
    bool batch_pending = job.batch_command != 0 && now - job.batch_command_at <= config.ready_timeout_s;
    bool frozen = job.paused || paused_all || !job.launcher.is_object() || in_flight || batch_pending ||
                  now - job.last_rescale_at < config.min_rescale_interval_s;
    if (frozen) in.frozen_jobs.insert(id);
    // A job grows once its program trains (it reported a step: its speed at the base size is
    // measured) and not when it is about to finish: an extension would join too late to pay off,
    // or be scheduled after its parent ended (docs/admin-guide.md, extensions.min_time_left).
    bool may_grow = now >= job.grow_backoff_until && job.metrics_received > 0;
    if (job.metrics_received == 0) in.no_step.insert(id);
    if (auto left = TimeLeftAtCurrentSize(job, now); left && *left < config.MinTimeLeftS()) {
      may_grow = false;
      in.finishing[id] = *left;
    }
    int max_gpus = MaxGpus(job, planned, account_ext[job.account], config);
    // The leader runs node group 0, on the first node of the job's allocation (SLURM_NODEID 0).
    auto info = info_by_id.find(id);
    std::string leader;
    std::size_t node_count = 0;
    if (info != info_by_id.end() && !info->second->node_names.empty()) {
      leader = info->second->node_names.front();
      node_count = info->second->node_names.size();
    }
    // A job that grows by relaunch grows in place on its leader's node while an extension joined
    // there in place is in its world (a relaunch would end that extension's ranks).
    bool joined_in_place = false;
    for (const auto& [eid, e] : registry.extensions) {
      joined_in_place = joined_in_place || (e.parent == id && e.Active() && !job.relaunch_groups.count(e.group));
    }
    if (job.GrowsByRelaunch() && !joined_in_place) {
      // Any node, by relaunch; a world of several node groups cannot be relaunched (its other
      // launchers would end with it): such a job keeps its size.
      if (node_count > 1) {
        in.several_nodes.insert(id);
        max_gpus = planned;
      }
      in.relaunch_leader[id] = leader;
    } else if (job.GrowsOnLeaderNodeOnly() || job.GrowsByRelaunch()) {
      // Such a runtime adds ranks to a world on that node alone: a job on several nodes keeps its
      // size, one on one node grows up to the GPUs of its type there (its own included).
      int held = 0;
      if (auto nit = in.node_by_name.find(leader); nit != in.node_by_name.end() && node_count == 1) {
        for (const auto& t : nit->second->Types()) held += t.type == job.gpu_type ? t.gpus : 0;
      }
      if (node_count > 1) in.several_nodes.insert(id);
      max_gpus = std::max(planned, std::min(max_gpus, held));
      in.leader_node_only[id] = leader;
    }
    int gpn = in.GpusPerNode(job.gpu_type);
    if (frozen) {
      oj.max_gpus = planned;
      oj.options = {{job.gpu_type, planned, job.batch, 1.0}};
      oj.min_gpus = planned;
    } else {
      oj.max_gpus = may_grow ? max_gpus : planned;
      oj.options = CachedOptions(job, oj.max_gpus, gpn, now);
      if (auto left = TimeLeftAtBase(job, oj.options, planned)) oj.remaining_s = *left;
      // The option at the current size is worth a bit more: hysteresis against flapping.
      for (auto& o : oj.options) {
        if (o.gpus == planned) o.utility *= 1.0 + config.min_gain;
      }
      if (oj.options.empty()) oj.options = {{job.gpu_type, planned, job.batch, 1.0}};
    }
    for (const auto& o : oj.options) {
      if (o.batch > 0) in.batch_at[id][o.gpus] = o.batch;
    }
    oj.allowed_types = {job.gpu_type};
    if (!frozen) {
      nlohmann::json checks = nlohmann::json::object();
      AddOtherTypes(job, info == info_by_id.end() ? nullptr : info->second, capacity, config, now, move_cost_s, oj,
                    checks);
      if (!checks.empty()) in.move_checks[id] = checks;
    }
    snap.jobs.push_back(std::move(oj));
    in.elastic_order.push_back(id);
  }
  // Pending jobs (rigid or elastic) are demand at their requested size.
  for (const auto& j : sjobs) {
    if (j.state != SlurmJobState::kPending || !j.waits_for_resources || j.gpus == 0) continue;
    if (extension_jobs.count(j.id) || contract::IsExtensionComment(j.admin_comment)) continue;
    optimizer::Job oj = WaitingJob(j, capacity, config.pending_weight);
    for (const auto& o : oj.options) in.waiting_types.insert(o.gpu_type);
    if (j.gpus_per_node > 0 && j.nodes_min > 0 && !oj.options.empty()) {
      in.waiting_shapes.push_back({j.id, j.gpu_type, j.nodes_min, j.gpus_per_node, j.priority});
    }
    if (!oj.options.empty()) snap.jobs.push_back(std::move(oj));
  }
  std::sort(in.waiting_shapes.begin(), in.waiting_shapes.end(), [](const auto& a, const auto& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.job < b.job;
  });
  for (const auto& [type, cap] : capacity) {
    if (cap > 0) snap.cluster.types.push_back({type, cap, 1});  // capacity in GPUs; nodes are chosen below
  }
  // Drop options on types without capacity (e.g. every node of a type drained).
  for (auto& j : snap.jobs) {
    std::erase_if(j.options, [&](const optimizer::Option& o) { return capacity[o.gpu_type] <= 0; });
  }
  std::erase_if(snap.jobs, [](const optimizer::Job& j) { return j.options.empty(); });
  return in;
}

}  // namespace elastic::controller
