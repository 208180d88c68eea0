// The event loop on a cluster of several GPU types (hetero.h): per-type ground truth, per-type
// option tables, the policies' plans mapped onto one type per job, sticky placement within a
// type, and the mechanism's cost for every change of type or GPU count (ChangeCostS).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include "elastic/optimizer/goodput.h"
#include "elastic/optimizer/policy.h"
#include "elastic/simulator/hetero.h"
#include "exact_mckp.h"
#include "node_fill.h"
#include "objective_options.h"
#include "sia_policy.h"

namespace elastic::simulator {
namespace {

namespace opt = elastic::optimizer;

constexpr const char* kPool = "pool";  // the one GPU type type-unaware policies see

struct Opt {
  int type = 0;  // cluster type (type-unaware: the reference type)
  int gpus = 0;
  int64_t batch = 0;
  double goodput = 0.0;  // samples/s, efficiency-weighted
};

struct HJob {
  const JobSpec* spec = nullptr;
  JobResult* res = nullptr;
  std::vector<const Application*> apps;  // per cluster type
  double speed = 1.0;                    // 1 / slowdown of the ground truth
  int max_gpus = 1;                      // per job, over all types
  bool frozen = false;
  int64_t fixed_batch = 0;
  double target = 0.0;

  double progress = 0.0;
  int epoch = 0;
  int type = -1;           // type it runs on (-1: none)
  std::vector<int> alloc;  // GPUs per node of its type
  int gpus = 0;
  int64_t batch = 0, local = 0;
  int accum = 0;
  double pause = 0.0;
  bool started = false, done = false;

  std::vector<Opt> opts;  // cached option table
  double min_goodput = 0.0;  // utility 1: the job's base configuration
  int cache_epoch = -1;
  int64_t cache_batch = -1;
};

void SplitBatch(const Application& app, int64_t batch, int gpus, int64_t& local, int& accum) {
  const int64_t per_gpu = std::max<int64_t>(1, batch / gpus);
  int64_t a = 0;
  if (per_gpu > app.max_local_batch) a = (per_gpu + app.max_local_batch - 1) / app.max_local_batch - 1;
  accum = static_cast<int>(a);
  local = std::max<int64_t>(1, batch / (gpus * (a + 1)));
}

double Rate(const HJob& j) {
  const Application& app = *j.apps[static_cast<size_t>(j.type)];
  const StepTimes st = app.StepTime(j.alloc, static_cast<double>(j.local));
  const double total = st.step + j.accum * std::max(0.0, st.step - st.sync);
  const double b = static_cast<double>(j.local) * j.gpus * (j.accum + 1);
  const GradStats g = app.Stats(b, j.epoch);
  const double s = b / static_cast<double>(app.init_batch);
  const double denom = g.var / s + g.sqr;
  return j.speed * (denom > 0.0 ? (g.var + g.sqr) / denom : 1.0) / total;
}

// The GPU counts a job may get on a type with `gpn` GPUs per node. Sia's configurations: 1, 2,
// 4, ... below a node, then whole nodes (sia and the type-unaware baselines). The dp policy
// (`any`): every count, as elasticd gives them (a job grows and shrinks by its GPU step).
std::vector<int> Counts(int gpn, int capacity, int max_gpus, bool any) {
  std::vector<int> n;
  if (any) {
    for (int g = 1; g <= capacity; ++g) n.push_back(g);
  } else {
    for (int g = 1; g < gpn; g *= 2) n.push_back(g);
    for (int g = gpn; g <= capacity; g += gpn) n.push_back(g);
  }
  std::vector<int> out;
  for (int g : n) {
    if (g <= max_gpus) out.push_back(g);
  }
  return out;
}

class HeteroEngine {
 public:
  HeteroEngine(const TypedApps& apps, const std::vector<JobSpec>& specs, const HeteroConfig& c, HeteroStats* st)
      : apps_(apps), specs_(specs), c_(c), stats_(st) {}
  Result<SimResult> Run();

 private:
  Status Setup();
  void BuildOptions(HJob& j);
  Status Schedule(double now, size_t epoch_index);
  Status PlanSia(double now, const std::vector<size_t>& active, std::vector<int>& type, std::vector<int>& gpus,
                 std::vector<int64_t>& batch);
  Status PlanOptimizer(double now, const std::vector<size_t>& active, std::vector<int>& type, std::vector<int>& gpus,
                       std::vector<int64_t>& batch);
  Result<optimizer::Plan> SolveExactly(const optimizer::Snapshot& snap, const optimizer::PolicyOptions& po);
  void Place(size_t t, const std::vector<std::pair<size_t, int>>& wants);
  void Advance(HJob& j, double t0, double dt);

  const TypedApps& apps_;
  const std::vector<JobSpec>& specs_;
  const HeteroConfig& c_;
  HeteroStats* stats_;
  bool sia_ = false, aware_ = false, exact_ = false;
  std::unique_ptr<opt::Policy> policy_;
  std::vector<HJob> jobs_;
  SimResult result_;
  HeteroStats local_stats_;
};

Status HeteroEngine::Setup() {
  const ClusterSpec& cl = c_.cluster;
  if (cl.types.empty()) return Status(ErrorKind::kInvalidArgument, "the cluster has no GPU type");
  if (!(c_.period_s > 0.0)) return Status(ErrorKind::kInvalidArgument, "the scheduling period must be > 0");
  sia_ = c_.policy == "sia";
  aware_ = sia_ || c_.policy == "dp";
  if (!sia_) {
    Result<std::unique_ptr<opt::Policy>> p = opt::MakePolicy(c_.policy);
    if (!p.ok() || c_.policy == "static") {
      return Status(ErrorKind::kInvalidArgument, "policy '" + c_.policy +
                                                     "' is not available on a cluster of several GPU types (known: sia, dp, "
                                                     "greedy, optimus, evolutionary, pollux)");
    }
    policy_ = std::move(p).value();
  }
  if (c_.policy == "greedy" || c_.policy == "evolutionary") aware_ = true;
  if (c_.exact) {
    if (c_.policy != "dp") return Status(ErrorKind::kInvalidArgument, "an exact solve is available for the dp policy only");
    exact_ = true;
  }
  const int total = cl.TotalGpus();
  jobs_.resize(specs_.size());
  result_.jobs.resize(specs_.size());
  local_stats_.moves.assign(specs_.size(), 0);
  local_stats_.gpu_seconds_by_type.assign(specs_.size(), {});
  for (size_t i = 0; i < specs_.size(); ++i) {
    const JobSpec& s = specs_[i];
    HJob& j = jobs_[i];
    j.spec = &s;
    j.res = &result_.jobs[i];
    j.res->name = s.name;
    j.res->app = s.app;
    j.res->arrival_s = s.arrival_s;
    for (const ClusterType& t : cl.types) {
      auto pa = apps_.find(t.profile);
      if (pa == apps_.end()) return Status(ErrorKind::kInvalidArgument, "no applications loaded for profile '" + t.profile + "'");
      auto a = pa->second.find(s.app);
      if (a == pa->second.end()) {
        return Status(ErrorKind::kInvalidArgument,
                      "job '" + s.name + "': application '" + s.app + "' has no profile '" + t.profile + "'");
      }
      j.apps.push_back(a->second.get());
    }
    const Application& ref = *j.apps.front();
    j.speed = c_.sia_calibration ? 1.0 / SiaSlowdown(s.app) : 1.0;
    j.target = ref.TargetProgress();
    j.frozen = c_.policy == "optimus";
    j.fixed_batch = s.req_batch > 0 ? s.req_batch : ref.init_batch;
    int mx = total;
    const int64_t cap = j.frozen ? j.fixed_batch : ref.max_batch;
    mx = static_cast<int>(std::min<int64_t>(mx, std::max<int64_t>(1, cap / ref.min_local_batch)));
    if (c_.elastic_max_gpus > 0) mx = std::min(mx, c_.elastic_max_gpus);
    if (s.max_gpus > 0) mx = std::min(mx, s.max_gpus);
    if (std::find(c_.rigid_apps.begin(), c_.rigid_apps.end(), s.app) != c_.rigid_apps.end()) mx = 1;
    j.max_gpus = mx;
  }
  return Status::Ok();
}

// The job's goodput per (type, count) for its current epoch and batch (type-unaware policies:
// the reference type's model, counts up to the whole cluster).
void HeteroEngine::BuildOptions(HJob& j) {
  const Application& ref = *j.apps.front();
  const int64_t b_obs = j.gpus > 0 ? j.batch : (j.frozen ? j.fixed_batch : ref.init_batch);
  if (j.cache_epoch == j.epoch && j.cache_batch == b_obs) return;
  j.cache_epoch = j.epoch;
  j.cache_batch = b_obs;
  j.opts.clear();
  const GradStats g = ref.Stats(static_cast<double>(b_obs), j.epoch);
  const ClusterSpec& cl = c_.cluster;
  const size_t types = aware_ ? cl.types.size() : 1;
  j.min_goodput = 0.0;
  for (size_t t = 0; t < types; ++t) {
    const Application& a = *j.apps[t];
    opt::Job job;
    job.id = j.spec->name;
    job.min_gpus = 1;
    job.max_gpus = j.max_gpus;
    job.min_batch = j.frozen ? 1 : a.init_batch;
    job.max_batch = j.frozen ? j.fixed_batch : std::max(a.max_batch, a.init_batch);
    job.min_local_batch = std::min(a.min_local_batch, job.min_batch);
    job.max_local_batch = a.max_local_batch;
    job.accumulation = true;
    const std::string tname = cl.types[t].name;
    auto tp = std::make_shared<opt::PolluxThroughput>(std::map<std::string, opt::PolluxParams>{{tname, a.oracle_fit}});
    const opt::GoodputModel model(tp, {static_cast<double>(a.init_batch), g.sqr, g.var});
    const int gpn = cl.types[t].gpus_per_node;
    const int capacity = aware_ ? cl.types[t].capacity() : cl.TotalGpus();
    for (int n : Counts(gpn, capacity, j.max_gpus, c_.policy == "dp")) {
      const opt::Placement pl{tname, (n + gpn - 1) / gpn, n};
      std::optional<opt::BatchChoice> bc = j.frozen ? model.Evaluate(job, pl, j.fixed_batch) : model.BestBatch(job, pl);
      if (!bc || !(bc->goodput > 0.0)) continue;
      j.opts.push_back({static_cast<int>(t), n, bc->batch, bc->goodput});
      if (j.min_goodput == 0.0 || bc->goodput < j.min_goodput) j.min_goodput = bc->goodput;
    }
  }
}

Status HeteroEngine::PlanSia(double now, const std::vector<size_t>& active, std::vector<int>& type,
                             std::vector<int>& gpus, std::vector<int64_t>& batch) {
  std::vector<sia::JobInput> in(active.size());
  for (size_t k = 0; k < active.size(); ++k) {
    HJob& j = jobs_[active[k]];
    BuildOptions(j);
    for (size_t o = 0; o < j.opts.size(); ++o) {
      const Opt& op = j.opts[o];
      const double cost = ChangeCostS(j.spec->app, j.type, j.gpus, op.type, op.gpus, c_.rescale);
      in[k].configs.push_back({op.type, op.gpus, op.goodput / j.min_goodput, sia::ReallocFactor(now - j.spec->arrival_s, j.res->rescales, cost)});
      if (j.gpus > 0 && op.type == j.type && op.gpus == j.gpus) in[k].current = static_cast<int>(o);
    }
    in[k].pinned = j.gpus > 0 && j.pause > 0.0;
  }
  std::vector<int64_t> cap;
  for (const ClusterType& t : c_.cluster.types) cap.push_back(t.capacity());
  sia::Params p;
  p.p = c_.sia_p;
  p.lambda_n = c_.sia_lambda_n;
  p.time_budget_ms = c_.time_budget_ms;
  Result<sia::Solution> s = sia::Solve(in, cap, p);
  if (!s.ok()) return s.status();
  if (!s.value().proven) {
    ++local_stats_.unproven;
    local_stats_.cbc_error = s.value().cbc_error;
  } else {
    ++(s.value().by_cbc ? local_stats_.solved_by_cbc : local_stats_.solved_by_mckp);
  }
  for (size_t k = 0; k < active.size(); ++k) {
    const int c = s.value().choice[k];
    if (c < 0) continue;
    const Opt& o = jobs_[active[k]].opts[static_cast<size_t>(c)];
    type[k] = o.type;
    gpus[k] = o.gpus;
    batch[k] = o.batch;
  }
  return Status::Ok();
}

// The weighted-sum problem the dp policy solves (its values, keep_running's guarantee), solved to
// proven optimality (exact_mckp.h).
Result<opt::Plan> HeteroEngine::SolveExactly(const opt::Snapshot& snap, const opt::PolicyOptions& po) {
  const auto t0 = std::chrono::steady_clock::now();
  opt::MckpProblem problem;
  for (const opt::GpuType& t : snap.cluster.types) problem.capacity.push_back(t.capacity());
  std::vector<std::vector<double>> values(snap.jobs.size());
  double bonus = 1.0;
  for (size_t j = 0; j < snap.jobs.size(); ++j) {
    double best = 0.0;
    for (const opt::Option& o : snap.jobs[j].options) {
      values[j].push_back(opt::OptionValue(po.objective, snap.jobs[j], o));
      best = std::max(best, values[j].back());
    }
    bonus += best;
  }
  for (size_t j = 0; j < snap.jobs.size(); ++j) {
    const bool keep = po.keep_running && snap.jobs[j].state == opt::JobState::kRunning;
    std::vector<opt::MckpItem> items;
    for (size_t o = 0; o < values[j].size(); ++o) {
      const opt::Option& op = snap.jobs[j].options[o];
      const int t = snap.cluster.TypeIndex(op.gpu_type);
      items.push_back({t, op.gpus, keep ? std::max(values[j][o], 0.0) + bonus : values[j][o]});
    }
    problem.AddJob(items);
  }
  Result<ExactMckp> e = SolveMckpExactly(problem, po.time_budget_ms);
  if (!e.ok()) return e.status();
  if (!e.value().proven) {
    ++local_stats_.unproven;
    local_stats_.cbc_error = e.value().cbc_error;
  } else if (e.value().by_cbc) {
    ++local_stats_.solved_by_cbc;
  } else {
    ++local_stats_.solved_by_mckp;
  }
  opt::Plan plan;
  plan.policy = c_.policy;
  plan.method = e.value().by_cbc ? "cbc" : "mckp";
  plan.exact = e.value().proven;
  for (size_t j = 0; j < snap.jobs.size(); ++j) {
    opt::Assignment a;
    a.job_id = snap.jobs[j].id;
    const int c = e.value().choice[j];
    if (c >= 0) {
      const opt::Option& o = snap.jobs[j].options[static_cast<size_t>(c)];
      a.pending = false;
      a.gpu_type = o.gpu_type;
      a.gpus = o.gpus;
      a.batch = o.batch;
      a.utility = o.utility;
      plan.objective += values[j][static_cast<size_t>(c)];
    }
    plan.assignments.push_back(std::move(a));
  }
  plan.bound = plan.objective;
  plan.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

Status HeteroEngine::PlanOptimizer(double now, const std::vector<size_t>& active, std::vector<int>& type,
                                   std::vector<int>& gpus, std::vector<int64_t>& batch) {
  const ClusterSpec& cl = c_.cluster;
  opt::Snapshot snap;
  if (aware_) {
    for (const ClusterType& t : cl.types) snap.cluster.types.push_back({t.name, t.nodes, t.gpus_per_node});
  } else {
    const int gpn = cl.types.front().gpus_per_node;
    const int total = cl.TotalGpus();
    if (total % gpn == 0) snap.cluster.types.push_back({kPool, total / gpn, gpn});
    else snap.cluster.types.push_back({kPool, total, 1});
  }
  const bool srpt = c_.weights == JobWeights::kRemaining;
  opt::Objective penalty;  // the rescale penalty's form: remaining-time (srpt) or Pollux's
  if (srpt) penalty.rescale_payback = c_.rescale_payback;
  for (size_t k = 0; k < active.size(); ++k) {
    HJob& j = jobs_[active[k]];
    BuildOptions(j);
    opt::Job job;
    job.id = j.spec->name + "#" + std::to_string(active[k]);
    job.min_gpus = 1;
    job.max_gpus = std::max(j.max_gpus, j.gpus);
    // At the base configuration (utility 1), as the optimizer's objectives expect.
    job.remaining_s = std::clamp((j.target - j.progress) * static_cast<double>(j.apps.front()->init_batch) / j.min_goodput,
                                 1.0, opt::kMaxRemainingInputS);
    job.state = j.gpus > 0 ? opt::JobState::kRunning : opt::JobState::kPending;
    job.age_s = now - j.spec->arrival_s;
    job.rescales = j.res->rescales;
    for (const Opt& o : j.opts) {
      const std::string tname = aware_ ? cl.types[static_cast<size_t>(o.type)].name : kPool;
      double u = o.goodput / j.min_goodput;
      const bool same = j.gpus > 0 && o.gpus == j.gpus && (!aware_ || o.type == j.type);
      // The optimizer's rescale penalty at the change's own cost (a type-unaware policy sees no types).
      const int to_type = aware_ ? o.type : j.type;
      if (j.gpus > 0 && !same) u *= opt::RescaleFactor(penalty, job, u, ChangeCostS(j.spec->app, j.type, j.gpus, to_type, o.gpus, c_.rescale));
      job.options.push_back({tname, o.gpus, o.batch, u});
    }
    if (j.gpus > 0) job.current = opt::Configuration{aware_ ? cl.types[static_cast<size_t>(j.type)].name : kPool, j.gpus, 0};
    snap.jobs.push_back(std::move(job));
  }
  opt::PolicyOptions po;
  po.time_budget_ms = c_.time_budget_ms;
  po.place = false;
  po.keep_running = internal::KeepsRunningJobs(c_.keep_running, c_.policy);
  po.objective.rescale_cost_s = 0.0;  // applied per job above
  Status objective = internal::ApplyObjectiveOptions(c_.objective, c_.p, c_.pending_penalty, snap.cluster, &po.objective);
  if (!objective.ok()) return objective;
  if (srpt) po.objective.srpt_exponent = c_.srpt_exponent;
  po.seed = c_.seed * 1000003ULL + local_stats_.solves;
  Result<opt::Plan> plan = exact_ ? SolveExactly(snap, po) : policy_->Solve(snap, po);
  if (!plan.ok()) {
    return Status(exact_ ? plan.status().kind() : ErrorKind::kInternal,
                  "policy " + c_.policy + " at t=" + std::to_string(now) + ": " + plan.status().message());
  }
  result_.solve_ms_total += plan.value().solve_ms;
  if (plan.value().gap > 1e-9) {
    ++local_stats_.inexact_solves;
    local_stats_.max_gap = std::max(local_stats_.max_gap, plan.value().gap);
  }
  for (size_t k = 0; k < active.size(); ++k) {
    const opt::Assignment& a = plan.value().assignments[k];
    if (a.pending || a.gpus <= 0) continue;
    gpus[k] = a.gpus;
    batch[k] = a.batch > 0 ? a.batch : jobs_[active[k]].fixed_batch;
    type[k] = aware_ ? cl.TypeIndex(a.gpu_type) : -1;
  }
  if (aware_) return Status::Ok();
  // Type-unaware plan: one type per job. Running jobs stay where their count fits, the others
  // (largest first) go to the type with the most free GPUs, capped at what it has.
  std::vector<int> free_gpus;
  for (const ClusterType& t : cl.types) free_gpus.push_back(t.capacity());
  std::vector<size_t> order;
  for (size_t k = 0; k < active.size(); ++k) {
    if (gpus[k] == 0) continue;
    const HJob& j = jobs_[active[k]];
    if (j.gpus > 0 && gpus[k] <= free_gpus[static_cast<size_t>(j.type)]) {
      type[k] = j.type;
      free_gpus[static_cast<size_t>(j.type)] -= gpus[k];
    } else {
      order.push_back(k);
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return gpus[a] > gpus[b]; });
  for (size_t k : order) {
    const auto t = static_cast<size_t>(std::max_element(free_gpus.begin(), free_gpus.end()) - free_gpus.begin());
    const int got = std::min(gpus[k], free_gpus[t]);
    if (got <= 0) {
      gpus[k] = 0;
      continue;
    }
    type[k] = static_cast<int>(t);
    gpus[k] = got;
    free_gpus[t] -= got;
  }
  return Status::Ok();
}

// Sticky placement on type t: jobs keeping the type shrink from their smallest slices; growing and
// new jobs (largest increase first) take GPUs on their nodes, whole free nodes, the best-fitting
// node, then the freest nodes. `wants`: (job, GPUs on this type).
void HeteroEngine::Place(size_t t, const std::vector<std::pair<size_t, int>>& wants) {
  const ClusterType& ct = c_.cluster.types[t];
  const int gpn = ct.gpus_per_node;
  std::vector<int> free_gpus(static_cast<size_t>(ct.nodes), gpn);
  std::vector<std::pair<size_t, int>> grow;
  for (const auto& [i, want] : wants) {
    HJob& j = jobs_[i];
    if (j.type != static_cast<int>(t)) j.alloc.assign(static_cast<size_t>(ct.nodes), 0);
    int have = 0;
    for (int g : j.alloc) have += g;
    ShrinkOnNodes(j.alloc, have, want);
    have = std::min(have, want);
    for (size_t n = 0; n < j.alloc.size(); ++n) free_gpus[n] -= j.alloc[n];
    if (want > have) grow.emplace_back(i, want - have);
  }
  std::stable_sort(grow.begin(), grow.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (auto [i, need] : grow) {
    HJob& j = jobs_[i];
    GrowOnNodes(j.alloc, free_gpus, need, gpn);
  }
}

Status HeteroEngine::Schedule(double now, size_t /*epoch_index*/) {
  std::vector<size_t> active;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    HJob& j = jobs_[i];
    if (j.done && j.gpus > 0) {
      j.gpus = 0;
      j.type = -1;
      std::fill(j.alloc.begin(), j.alloc.end(), 0);
    }
    if (!j.done && specs_[i].arrival_s <= now) active.push_back(i);
  }
  std::vector<int> type(active.size(), -1), gpus(active.size(), 0);
  std::vector<int64_t> batch(active.size(), 0);
  if (!active.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    Status s = sia_ ? PlanSia(now, active, type, gpus, batch) : PlanOptimizer(now, active, type, gpus, batch);
    if (!s.ok()) return s;
    if (sia_) result_.solve_ms_total += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++local_stats_.solves;
  }
  // Check the plan against each type's capacity, then place type by type.
  const ClusterSpec& cl = c_.cluster;
  std::vector<std::vector<std::pair<size_t, int>>> per_type(cl.types.size());
  std::vector<int> used(cl.types.size(), 0);
  for (size_t k = 0; k < active.size(); ++k) {
    if (gpus[k] <= 0) continue;
    if (type[k] < 0 || type[k] >= static_cast<int>(cl.types.size())) {
      return Status(ErrorKind::kInternal, "policy " + c_.policy + " returned an unknown GPU type");
    }
    per_type[static_cast<size_t>(type[k])].emplace_back(active[k], gpus[k]);
    used[static_cast<size_t>(type[k])] += gpus[k];
  }
  for (size_t t = 0; t < cl.types.size(); ++t) {
    if (used[t] > cl.types[t].capacity()) {
      return Status(ErrorKind::kInternal, "policy " + c_.policy + " used " + std::to_string(used[t]) + " GPUs of type " +
                                              cl.types[t].name);
    }
  }
  std::vector<int> old_type(active.size()), old_gpus(active.size());
  for (size_t k = 0; k < active.size(); ++k) {
    old_type[k] = jobs_[active[k]].type;
    old_gpus[k] = jobs_[active[k]].gpus;
  }
  for (size_t t = 0; t < cl.types.size(); ++t) Place(t, per_type[t]);
  int allocated = 0, running = 0;
  for (size_t k = 0; k < active.size(); ++k) {
    HJob& j = jobs_[active[k]];
    const int after = gpus[k];
    if (after > 0) {
      const double cost = ChangeCostS(j.spec->app, old_type[k], old_gpus[k], type[k], after, c_.rescale);
      if (cost > 0.0) {
        j.pause = std::max(j.pause, cost);  // a resize does not shorten a restart under way
        if (!j.started) {
          j.started = true;
          j.res->start_s = now;
        } else {
          ++j.res->rescales;
          if (old_gpus[k] > 0 && old_type[k] != type[k]) ++local_stats_.moves[active[k]];
        }
      }
      j.type = type[k];
      j.gpus = after;
      j.batch = batch[k];
      SplitBatch(*j.apps[static_cast<size_t>(j.type)], j.batch, j.gpus, j.local, j.accum);
      j.res->max_gpus_used = std::max(j.res->max_gpus_used, after);
      j.res->last_batch = j.local * j.gpus * (j.accum + 1);
      allocated += after;
      ++running;
    } else {
      if (old_gpus[k] > 0) ++j.res->rescales;  // preempted
      j.gpus = 0;
      j.type = -1;
      std::fill(j.alloc.begin(), j.alloc.end(), 0);
    }
  }
  result_.epochs.push_back({now, allocated, running, static_cast<int>(active.size()) - running, 0.0});
  return Status::Ok();
}

void HeteroEngine::Advance(HJob& j, double t0, double dt) {
  if (j.done || j.gpus == 0) return;
  const Application& app = *j.apps[static_cast<size_t>(j.type)];
  double& by_type = local_stats_.gpu_seconds_by_type[static_cast<size_t>(&j - jobs_.data())][c_.cluster.types[static_cast<size_t>(j.type)].name];
  const double before = j.res->gpu_seconds;
  double t = t0;
  const double d = std::min(j.pause, dt);
  j.pause -= d;
  t += d;
  j.res->gpu_seconds += d * j.gpus;
  double rem = dt - d;
  while (rem > 0.0 && !j.done) {
    const double rate = Rate(j);
    const double next = app.ProgressAt(j.epoch + 1);
    if (j.progress + rate * rem < next) {
      j.progress += rate * rem;
      j.res->gpu_seconds += rem * j.gpus;
      break;
    }
    const double delta = std::max(0.0, (next - j.progress) / rate);
    j.progress = next;
    ++j.epoch;
    t += delta;
    rem -= delta;
    j.res->gpu_seconds += delta * j.gpus;
    if (j.epoch >= app.max_epochs || j.progress >= j.target) {
      j.done = true;
      j.res->finish_s = t;
    }
  }
  by_type += j.res->gpu_seconds - before;
}

Result<SimResult> HeteroEngine::Run() {
  const auto wall0 = std::chrono::steady_clock::now();
  if (Status s = Setup(); !s.ok()) return s;
  result_.total_gpus = c_.cluster.TotalGpus();
  const double P = c_.period_s;
  double t = 0.0;
  size_t epoch = 0, finished = 0;
  while (finished < jobs_.size() && t < c_.max_time_s) {
    bool any_active = false;
    double next_arrival = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (jobs_[i].done) continue;
      if (specs_[i].arrival_s <= t) any_active = true;
      else next_arrival = std::min(next_arrival, specs_[i].arrival_s);
    }
    if (!any_active && std::isfinite(next_arrival)) {
      const double k = std::ceil(next_arrival / P);
      if (k * P > t) {
        result_.epochs.push_back({t, 0, 0, 0, 0.0});
        epoch += static_cast<size_t>(k - t / P);
        t = k * P;
      }
    }
    if (Status s = Schedule(t, epoch); !s.ok()) return s;
    for (HJob& j : jobs_) Advance(j, t, P);
    t += P;
    ++epoch;
    finished = 0;
    for (const HJob& j : jobs_) finished += j.done ? 1 : 0;
    if (c_.progress) c_.progress(t, finished, jobs_.size());
  }
  result_.end_s = t;
  result_.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
  if (stats_) *stats_ = std::move(local_stats_);
  return std::move(result_);
}

}  // namespace

Result<SimResult> SimulateHetero(const TypedApps& apps, const std::vector<JobSpec>& jobs, const HeteroConfig& config,
                                 HeteroStats* stats) {
  HeteroEngine e(apps, jobs, config, stats);
  return e.Run();
}

}  // namespace elastic::simulator
