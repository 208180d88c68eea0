// The scheduling epoch: bring the registry in line with Slurm (lifecycle.cpp), build the plan's
// input (plan_input.cpp), plan, then diff the plan against the registry and enact it: node
// groups for growth, whole extension groups for shrinking, batch changes at an unchanged size.
#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "controller.h"
#include "free_gpus.h"
#include "elastic/common/log.h"
#include "elastic/optimizer/policy.h"
#include "job_model.h"
#include "model_refits.h"
#include "type_moves.h"
#include "waiting_room.h"

namespace elastic::controller {
namespace {

constexpr const char* kComponent = "controller";

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace


EpochResult Controller::RunEpoch(bool dry_run, const std::string& why) {
  auto t0 = Clock::now();
  if (!dry_run) trigger_.Ran(Now());
  auto nodes_r = slurm_->LoadNodes();
  auto jobs_r = slurm_->LoadJobs();
  std::string reason = why;
  if (jobs_r.ok()) {
    // What this epoch sees first is no event for a later one, but the log says it: an epoch that ran
    // for another reason (a timed one, a runtime event) may be the one that answers a submission.
    JobTableSummary now_seen = SummarizeJobs(jobs_r.value());
    const std::string changes = DescribeJobChanges(seen_jobs_, now_seen);
    seen_jobs_ = std::move(now_seen);
    if (config_.event_epochs && !changes.empty()) reason += (reason.empty() ? "" : "; first seen: ") + changes;
  }
  if (!reason.empty() && reason != "period") Log(LogLevel::kVerbose, kComponent, "epoch now: ", reason);
  if (!nodes_r.ok() || !jobs_r.ok()) {
    Log(LogLevel::kWarning, kComponent, "epoch skipped: ", (!nodes_r.ok() ? nodes_r.status() : jobs_r.status()).message());
    EpochResult skipped;
    skipped.plan = {{"skipped", true}};
    return skipped;
  }
  return Epoch(nodes_r.value(), jobs_r.value(), dry_run, MsSince(t0));
}

EpochResult Controller::Epoch(const std::vector<NodeInfo>& nodes, const std::vector<JobInfo>& sjobs, bool dry_run,
                               double slurm_ms) {
  auto t0 = Clock::now();
  EpochResult result;
  double now = Now();
  std::map<uint32_t, const JobInfo*> by_id;
  for (const auto& j : sjobs) by_id[j.id] = &j;
  for (auto& [id, job] : registry_.jobs) {  // the leader's node, for the world of a relaunch
    auto it = by_id.find(id);
    if (it != by_id.end() && !it->second->node_names.empty()) job.leader_node = it->second->node_names.front();
  }

  if (!dry_run) SyncWithSlurm(by_id, now);
  if (!dry_run) AdvanceMoves(nodes, by_id, now);

  // The jobs' step-time models, within the fit budget (model_refits.h): the plan's input and the
  // batch decisions use each job's last fit.
  auto t_fit = Clock::now();
  const RefitReport fits = RefitModels(registry_, config_.fit_budget_ms, now);
  result.stage_ms["fit"] = MsSince(t_fit);

  auto t_snap = Clock::now();
  PlanInput in = BuildPlanInput(registry_, nodes, sjobs, config_, paused_all_, now, MoveCostS());
  result.stage_ms["snapshot"] = MsSince(t_snap);

  // Holds end when their time is up, or when no job waits for their GPU type any more (it started).
  std::erase_if(holds_, [&](const auto& h) {
    return h.second.until <= now || (!in.waiting_types.count(h.second.type) && !in.waiting_types.count(""));
  });
  FreeGpus free(nodes, registry_, by_id, holds_);
  // Waiting jobs' nodes first (waiting_room.h). What leaves for them is leaving when the plan is
  // made (the plan's input again, without it), so that the plan does not shrink other jobs for
  // the same waiting jobs; each job an extension left changes nothing else this epoch (its next
  // decision comes once the extension has left, as after a shrink). A dry run plans as if nothing
  // had left.
  auto t_room = Clock::now();
  std::map<uint32_t, nlohmann::json> shrunk;
  const nlohmann::json room = MakeRoom(in, free, dry_run, now, shrunk);
  if (!shrunk.empty() && !dry_run) in = BuildPlanInput(registry_, nodes, sjobs, config_, paused_all_, now, MoveCostS());
  result.stage_ms["room"] = MsSince(t_room);

  auto t_plan = Clock::now();
  std::optional<optimizer::Plan> plan = Solve(in.snap);
  result.stage_ms["plan"] = MsSince(t_plan);

  auto t_diff = Clock::now();
  nlohmann::json decisions = DiffAndEnact(in, plan, free, shrunk, dry_run, now);
  result.stage_ms["diff"] = MsSince(t_diff);
  if (!dry_run && !in.waiting_types.empty()) {
    // A job waits, and jobs that just rescaled may not move yet: look again when the first may.
    double first = 0;
    uint32_t which = 0;
    for (uint32_t id : in.frozen_jobs) {
      const ElasticJob& job = registry_.jobs.at(id);
      const double at = job.last_rescale_at + config_.min_rescale_interval_s;
      if (!job.paused && at > now && (first == 0 || at < first)) {
        first = at;
        which = id;
      }
    }
    if (first != 0) trigger_.NotifyAt(first, "job " + std::to_string(which) + " may rescale again");
  }
  result.stage_ms["slurm"] = slurm_ms;
  result.duration_ms = MsSince(t0) + slurm_ms;  // what the epoch row and the log report

  result.plan = {{"policy", config_.policy},
                 {"objective", plan ? plan->objective : 0.0},
                 {"bound", plan ? plan->bound : 0.0},
                 {"solve_ms", plan ? plan->solve_ms : 0.0},
                 {"jobs", in.snap.jobs.size()},
                 {"capacity", in.capacity},
                 {"decisions", decisions},
                 {"room", room},
                 {"fits", fits.ToJson()},
                 {"stage_ms", result.stage_ms}};
  if (!dry_run) {
    ++epochs_;
    nlohmann::json inputs{{"capacity", in.capacity}, {"jobs", in.snap.jobs.size()}, {"elastic", in.elastic_order.size()}};
    if (!room.empty()) inputs["room"] = room;
    records::RecordEpoch(*db_, now, result.duration_ms, config_.policy, static_cast<int64_t>(in.snap.jobs.size()),
                         plan ? std::optional<double>(plan->objective) : std::nullopt, inputs, decisions);
    Log(LogLevel::kVerbose, kComponent, "epoch ", epochs_, ": ", in.snap.jobs.size(), " jobs, ", result.duration_ms, " ms, ",
        fits.fitted, " of ", fits.due, " due model fits");
  }
  return result;
}

std::optional<optimizer::Plan> Controller::Solve(const optimizer::Snapshot& snap) {
  auto policy = optimizer::MakePolicy(config_.policy);
  if (!policy.ok() || snap.jobs.empty() || snap.cluster.types.empty()) return std::nullopt;
  optimizer::PolicyOptions popts;
  popts.keep_running = true;
  popts.place = false;
  popts.objective.rescale_cost_s = config_.rescale_cost_s;
  popts.objective.srpt_exponent = config_.srpt_exponent;
  popts.objective.rescale_payback = config_.rescale_payback;
  if (config_.objective == "power-mean") popts.objective.kind = optimizer::ObjectiveKind::kPowerMean;
  popts.objective.p = config_.power_mean_p;
  // Jobs whose options all lie on one GPU type do not compete with other types: when every job is
  // such, each type is its own (single-type, exactly solvable) problem.
  std::map<std::string, optimizer::Snapshot> per_type;
  bool separable = true;
  for (const auto& j : snap.jobs) {
    std::set<std::string> types;
    for (const auto& o : j.options) types.insert(o.gpu_type);
    if (types.size() != 1) {
      separable = false;
      break;
    }
    per_type[*types.begin()].jobs.push_back(j);
  }
  if (!separable || per_type.size() < 2) per_type = {{"", snap}};
  // The epoch's solve budget is shared by the sub-problems: past it, dp returns a plan with a
  // certified bound instead of an exact one (docs/optimizer.md).
  popts.time_budget_ms = config_.solve_budget_ms / static_cast<double>(per_type.size());
  optimizer::Plan plan;
  plan.policy = config_.policy;
  for (auto& [type, sub] : per_type) {
    if (!type.empty()) {
      for (const auto& t : snap.cluster.types) {
        if (t.name == type) sub.cluster.types = {t};
      }
    }
    auto solved = policy.value()->Solve(sub, popts);
    if (!solved.ok()) {
      Log(LogLevel::kWarning, kComponent, "the optimizer failed: ", solved.status().message());
      return std::nullopt;
    }
    plan.objective += solved.value().objective;
    plan.bound += solved.value().bound;
    plan.solve_ms += solved.value().solve_ms;
    for (auto& a : solved.value().assignments) plan.assignments.push_back(std::move(a));
  }
  return plan;
}

nlohmann::json Controller::DiffAndEnact(const PlanInput& in, const std::optional<optimizer::Plan>& plan, FreeGpus& free,
                                        std::map<uint32_t, nlohmann::json>& shrunk, bool dry_run, double now) {
  std::map<std::string, const optimizer::Assignment*> assignment;
  if (plan) {
    for (const auto& a : plan->assignments) assignment[a.job_id] = &a;
  }
  nlohmann::json decisions = nlohmann::json::array();
  for (uint32_t id : in.elastic_order) {
    ElasticJob& job = registry_.jobs.at(id);
    if (auto sit = shrunk.find(id); sit != shrunk.end()) {
      decisions.push_back(std::move(sit->second));
      continue;
    }
    auto ait = assignment.find(std::to_string(id));
    // The plan's answer for the job; none when it was not planned or gets nothing this epoch.
    const optimizer::Assignment* a = ait != assignment.end() && !ait->second->pending ? ait->second : nullptr;
    decisions.push_back(Decide(job, in, a, free, dry_run, now));
  }
  return decisions;
}

nlohmann::json Controller::Decide(ElasticJob& job, const PlanInput& in, const optimizer::Assignment* a, FreeGpus& free,
                                  bool dry_run, double now) {
  const uint32_t id = job.id;
  int current = registry_.PlannedGpus(job);
  int target = a != nullptr ? a->gpus : current;
  // Extensions on nodes that start draining (or are down, failed, in maintenance) leave, whatever
  // the plan says. A node whose state slurmctld does not know right now (it stopped responding,
  // or slurmctld restarted and the node has not registered again) is no reason: Slurm itself ends
  // the extension if the node goes down.
  std::vector<int64_t> draining;
  for (const auto& [eid, e] : registry_.extensions) {
    auto nit = in.node_by_name.find(e.node);
    if (e.parent == id && e.state == ExtState::kJoined && nit != in.node_by_name.end() &&
        (nit->second->draining || (!nit->second->usable && !nit->second->unresponsive))) {
      draining.push_back(eid);
    }
  }
  // The global batch the plan chose for the target size (the current batch when it chose none).
  const int64_t target_batch = a != nullptr && a->batch > 0 ? a->batch : job.batch;
  nlohmann::json d{{"job", id}, {"current", current}, {"target", target}, {"batch", job.batch}, {"target_batch", target_batch}};
  if (auto f = in.finishing.find(id); f != in.finishing.end()) d["time_left_s"] = f->second;  // not grown
  if (in.no_step.count(id)) d["no_step_yet"] = true;  // not grown: its program has reported no step
  if (in.several_nodes.count(id)) d["several_nodes"] = true;  // not grown: its runtime adds ranks on one node only
  if (auto c = in.move_checks.find(id); c != in.move_checks.end()) d["move_checks"] = c->second;
  if (auto m = moves_.find(id); m != moves_.end()) {  // a move in flight: nothing else changes
    d["action"] = "move";
    d["move_to"] = m->second.to;
    return d;
  }
  if (a != nullptr && !a->gpu_type.empty() && a->gpu_type != job.gpu_type) {
    MaybeMove(job, in, *a, free, dry_run, now, d);
    return d;
  }
  if (target > current) {
    Grow(job, in, current, target, free, dry_run, d);
  } else if (target < current || !draining.empty()) {
    Shrink(job, in, current, target, draining, dry_run, now, d);
  } else {
    MaybeChangeBatch(job, in, current, target_batch, dry_run, d);
  }
  return d;
}

void Controller::MaybeMove(ElasticJob& job, const PlanInput& in, const optimizer::Assignment& a, FreeGpus& free,
                           bool dry_run, double now, Json& d) {
  d["move_to"] = a.gpu_type;
  const int current = registry_.PlannedGpus(job);
  if (current > job.base_gpus) {  // a move restarts the job at its base size: its extensions leave first
    Shrink(job, in, current, job.base_gpus, {}, dry_run, now, d);
    d["move"] = "after its extensions leave";
    return;
  }
  const auto check = CheckMove(job, a.gpu_type, MoveCostS(), config_.move_payback, config_, now);
  if (!check) {
    d["action"] = "stay";
    d["move"] = "its time left or its speed there is not known yet";
    return;
  }
  d["move_check"] = check->ToJson();
  if (!check->worth) {
    d["action"] = "stay";
    d["move"] = "does not pay back";
    return;
  }
  // The new type must have the job's base GPUs free now (Slurm places it; they are kept from growth).
  auto& per_node = free.free[a.gpu_type];
  int free_total = 0;
  for (const auto& [node, f] : per_node) free_total += f;
  if (free_total < job.base_gpus) {
    d["action"] = "stay";
    d["move"] = "not enough free GPUs there";
    return;
  }
  int need = job.base_gpus;
  auto& order = free.by_free[a.gpu_type];
  while (need > 0 && !order.empty()) {
    auto [neg, node] = *order.begin();
    order.erase(order.begin());
    const int take = std::min(-neg, need);
    per_node[node] -= take;
    need -= take;
    if (per_node[node] > 0) order.insert({-per_node[node], node});
  }
  d["action"] = "move";
  if (dry_run) return;
  Move m;
  m.from = job.gpu_type;
  m.to = a.gpu_type;
  m.started_at = now;
  m.check = check->ToJson();
  m.command = QueueCommand(job.id, {{"action", "checkpoint"}, {"reason", "move to GPU type " + a.gpu_type}});
  moves_[job.id] = std::move(m);
  Audit(std::nullopt, "move", job.id, {{"from", job.gpu_type}, {"to", a.gpu_type}, {"check", check->ToJson()}});
  Log(LogLevel::kInfo, kComponent, "job ", job.id, ": moving from ", job.gpu_type, " to ", a.gpu_type, " (", job.base_gpus,
      " GPUs): ", static_cast<int>(check->left_s), " s of training left there, ", static_cast<int>(check->left_new_s),
      " s on ", a.gpu_type, ", the move costs ", static_cast<int>(check->cost_s), " s; a checkpoint first");
}

void Controller::MaybeChangeBatch(ElasticJob& job, const PlanInput& in, int gpus, int64_t batch, bool dry_run,
                                  nlohmann::json& d) {
  const bool frozen = in.frozen_jobs.count(job.id) > 0 || in.finishing.count(job.id) > 0;
  if (DecideBatchChange(job, gpus, batch, frozen, in.GpusPerNode(job.gpu_type), config_.min_gain, d) && !dry_run) {
    QueueBatchChange(job, batch, gpus, d);
  }
}

void Controller::Grow(ElasticJob& job, const PlanInput& in, int current, int target, FreeGpus& free, bool dry_run,
                      nlohmann::json& d) {
  d["action"] = "grow";
  int need = target - current;
  int step = static_cast<int>(job.Spec().GpuStep());
  auto& order = free.by_free[job.gpu_type];
  nlohmann::json groups = nlohmann::json::array();
  std::vector<std::pair<int, std::string>> skipped;  // nodes with fewer free GPUs than a step, or not the job's
  const auto leader = in.leader_node_only.find(job.id);
  if (leader != in.leader_node_only.end()) d["grows_onto"] = "leader_node";
  std::vector<std::pair<std::string, int>> picked;  // (node, GPUs) of each extension to submit
  // A job that grows by relaunch where it cannot grow in place takes its leader's node first:
  // growth that fits there joins in place, which pauses it less (relaunch_world.h).
  const auto relaunch_leader = in.relaunch_leader.find(job.id);
  std::optional<std::pair<int, std::string>> first;
  if (relaunch_leader != in.relaunch_leader.end() && job.relaunch_groups.empty()) {
    for (auto it = order.begin(); it != order.end(); ++it) {
      if (it->second == relaunch_leader->second) {
        first = *it;
        order.erase(it);
        break;
      }
    }
  }
  while (need > 0 && (first || !order.empty())) {
    const bool leader_first = first.has_value();
    auto [neg_free, node] = leader_first ? *first : *order.begin();
    if (leader_first) first.reset();
    else order.erase(order.begin());
    if (leader != in.leader_node_only.end() && leader->second != node) {  // its runtime cannot start ranks there
      skipped.push_back({neg_free, node});
      continue;
    }
    int node_free = -neg_free;
    int take = std::min(node_free, need) / step * step;
    if (take <= 0) {
      skipped.push_back({neg_free, node});
      if (node_free < step && !leader_first) break;  // every later node has even fewer free GPUs
      continue;
    }
    groups.push_back({{"node", node}, {"gpus", take}});
    picked.emplace_back(node, take);
    int& left = free.free[job.gpu_type][node];
    left -= take;
    if (left > 0) order.insert({-left, node});
    need -= take;
  }
  for (auto& k : skipped) order.insert(k);
  // By relaunch (relaunch_world.h) when one of them is off the leader's node, or the job has a
  // relaunch group in its world already: all of this growth then, so that no group joined in
  // place is in a world that is started again.
  bool by_relaunch = relaunch_leader != in.relaunch_leader.end() && !job.relaunch_groups.empty();
  for (const auto& [node, take] : picked) {
    by_relaunch = by_relaunch || (relaunch_leader != in.relaunch_leader.end() && node != relaunch_leader->second);
  }
  if (by_relaunch) d["grows_onto"] = "relaunch";
  for (const auto& [node, take] : picked) {
    if (dry_run) break;
    if (Status s = SubmitExtension(job, node, take, by_relaunch); !s.ok()) {
      d["error"] = s.message();
      break;
    }
  }
  d["groups"] = groups;
  if (need > 0) {
    // Nodes had fewer free GPUs than the plan (they free up when other jobs shrink): the job grows
    // to what they had, with the batch of that size.
    d["wanted"] = target;
    d["target"] = target - need;
    d["target_batch"] = BatchFor(in, job, target - need);
  }
  if (!dry_run) {  // each grow command carries its size's batch (OnReady)
    auto per_job = in.batch_at.find(job.id);
    job.grow_batch = per_job != in.batch_at.end() ? per_job->second : std::map<int, int64_t>{};
  }
  // None at all: the job keeps its size this epoch, and may change its batch at that size.
  if (groups.empty()) MaybeChangeBatch(job, in, current, BatchFor(in, job, current), dry_run, d);
}

void Controller::Shrink(ElasticJob& job, const PlanInput& in, int current, int target,
                        const std::vector<int64_t>& draining, bool dry_run, double now, nlohmann::json& d) {
  d["action"] = "shrink";
  std::vector<Extension*> groups;
  for (auto& [eid, e] : registry_.extensions) {
    if (e.parent == job.id && e.Active() && e.state != ExtState::kLeaving) groups.push_back(&e);
  }
  // Any joined group may leave, in any order (docs/runtime.md): groups on draining nodes first,
  // whatever their age, so that they count toward the target and a drain takes one shrink; then
  // those not yet joined (nothing to take apart); then the latest joined (the newest capacity
  // goes first). Two extensions ready in the same epoch may join in either order, so the order
  // of group ids is not the order of joining.
  auto drains = [&](const Extension* e) { return std::find(draining.begin(), draining.end(), e->id) != draining.end(); };
  std::sort(groups.begin(), groups.end(), [&](Extension* a, Extension* b) {
    const bool a_drain = drains(a), b_drain = drains(b);
    if (a_drain != b_drain) return a_drain;
    const bool a_in = a->state == ExtState::kJoined, b_in = b->state == ExtState::kJoined;
    if (a_in != b_in) return !a_in;
    if (a_in && a->joined_at != b->joined_at) return a->joined_at > b->joined_at;
    return a->group > b->group;
  });
  int level = current;
  nlohmann::json leaving = nlohmann::json::array();
  std::vector<Extension*> chosen;
  for (Extension* e : groups) {
    if (level <= target && !drains(e)) continue;
    chosen.push_back(e);
    level -= e->gpus;
    leaving.push_back({{"group", e->group}, {"job", e->slurm_job}, {"gpus", e->gpus}, {"state", ExtStateName(e->state)}});
  }
  d["groups"] = leaving;
  if (dry_run) return;
  const bool someone_waits = in.waiting_types.count(job.gpu_type) > 0 || in.waiting_types.count("") > 0;
  if (someone_waits && config_.release_hold_s > 0) d["held_for_waiting_jobs_s"] = config_.release_hold_s;
  for (Extension* e : chosen) LetGo(job, *e, in, someone_waits, now);
}

void Controller::LetGo(ElasticJob& job, Extension& e, const PlanInput& in, bool hold, double now) {
  if (hold && config_.release_hold_s > 0) {
    Hold& h = holds_[{e.node, job.gpu_type}];
    h.node = e.node;
    h.type = job.gpu_type;
    h.gpus += e.gpus;
    h.until = now + config_.release_hold_s;
  }
  if (e.state == ExtState::kJoined) {
    // A relaunch group leaves by a relaunch over the world without it (its launcher holds the
    // node; the ranks there end with the world before it), the world as it is when the command
    // is sent (command_delivery.cpp).
    const bool by_relaunch = job.relaunch_groups.count(e.group) > 0;
    if (by_relaunch) {
      if (auto w = RelaunchWorldFor(job, {}, {e.group}); !w.ok() && w.status().kind() == ErrorKind::kInvalidArgument) {
        Log(LogLevel::kWarning, kComponent, "job ", job.id, ": group ", e.group, " cannot leave by relaunch: ",
            w.status().message());
        return;
      }
    }
    e.MoveTo(ExtState::kLeaving);
    e.leaving_at = now;  // the runtime has extensions.leave_timeout to carry it out (lifecycle.cpp)
    SaveExtension(e);
    // The runtime carries out its shrinks in order: this one leaves the job at its size once
    // every group leaving so far has left (several may leave in one epoch, or one may still be
    // leaving from an earlier one). The command carries that size's batch (a drain may leave it
    // below the plan's target, and group sizes need not meet the target exactly).
    const int to = registry_.PlannedGpus(job);
    const int from = to + e.gpus;
    if (!by_relaunch) {
      QueueCommand(job.id, {{"action", "shrink"}, {"group", e.group}, {"gpus", to}, {"global_batch", BatchFor(in, job, to)}});
    } else {
      QueueCommand(job.id, {{"action", "relaunch"}, {"op", "shrink"}, {"group", e.group}, {"gpus", to},
                            {"global_batch", BatchFor(in, job, to)}});
    }
    records::StartRescale(*db_, job.id, "shrink", e.group, from, to, now);
    Audit(std::nullopt, "shrink", job.id, {{"group", e.group}, {"from", from}, {"to", to}});
  } else if (e.state != ExtState::kJoining) {
    EndExtension(e, ExtState::kCancelled, "no longer in the plan", true);  // never joined: just cancel it
  }
}

}  // namespace elastic::controller
