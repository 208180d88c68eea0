// The simulation engine: one event loop (arrivals, scheduling epochs, progress, rescales, the
// FIFO baseline) over one cluster state (engine.h; fused sweeps in engine_sweeps.cpp).
#include "elastic/simulator/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "engine.h"
#include "node_fill.h"
#include "objective_options.h"

namespace elastic::simulator {
namespace internal {

int NodesOf(const std::vector<int>& alloc) {
  int n = 0;
  for (int g : alloc) n += g > 0 ? 1 : 0;
  return n;
}

// Local batch and accumulation for a global batch on `gpus` GPUs (the optimizer's rule).
void SplitBatch(const Application& app, int64_t batch, int gpus, int64_t& local, int& accum) {
  const int64_t per_gpu = std::max<int64_t>(1, batch / gpus);
  int64_t a = 0;
  if (per_gpu > app.max_local_batch) a = (per_gpu + app.max_local_batch - 1) / app.max_local_batch - 1;
  accum = static_cast<int>(a);
  local = std::max<int64_t>(1, batch / (gpus * (a + 1)));
}

// Progress per second of the job in its current configuration (ground truth), and the
// synchronised step time it observes.
double Rate(const SimJob& j, double* step_out) {
  static const std::vector<int> kOneGpu{1};
  const StepTimes st = j.app->StepTime(j.fused_width > 0 ? kOneGpu : j.alloc, static_cast<double>(j.local));
  const double total = st.step + j.accum * std::max(0.0, st.step - st.sync);
  const double b = static_cast<double>(j.local) * j.gpus * (j.accum + 1);
  const double s = b / static_cast<double>(j.app->init_batch);
  const GradStats g = j.app->Stats(b, j.epoch);
  const double denom = g.var / s + g.sqr;
  const double gain = denom > 0.0 ? (g.var + g.sqr) / denom : 1.0;
  if (step_out) *step_out = st.step;
  return j.fused_width > 0 ? gain / total * j.fuse_speed : gain / total;
}

Status Engine::Setup() {
  if (c_.nodes < 1 || c_.gpus_per_node < 1) return Status(ErrorKind::kInvalidArgument, "the cluster needs >= 1 node and >= 1 GPU per node");
  if (!(c_.period_s > 0.0)) return Status(ErrorKind::kInvalidArgument, "the scheduling period must be > 0");
  if (c_.restart_cost_s < 0 || c_.grow_cost_s < 0 || c_.shrink_cost_s < 0 || c_.start_cost_s < 0) {
    return Status(ErrorKind::kInvalidArgument, "rescale costs must be >= 0");
  }
  capacity_ = c_.nodes * c_.gpus_per_node;
  fifo_ = c_.policy == "fifo";
  rigid_ = fifo_ || c_.policy == "static";
  frozen_ = rigid_ || c_.policy == "optimus" || c_.batch_frozen;
  Result<std::unique_ptr<opt::Policy>> p = opt::MakePolicy(fifo_ ? "static" : c_.policy);
  if (!p.ok()) {
    if (fifo_) return p.status();
    return Status(ErrorKind::kInvalidArgument,
                  "unknown policy '" + c_.policy + "' (known: " + opt::PolicyNameList() + ", fifo)");
  }
  policy_ = std::move(p).value();
  popt_.time_budget_ms = c_.time_budget_ms;
  popt_.place = false;  // the simulator places (sticky)
  popt_.keep_running = internal::KeepsRunningJobs(c_.keep_running, c_.policy);
  {
    opt::Cluster cluster;
    cluster.types.push_back({c_.gpu_type, c_.nodes, c_.gpus_per_node});
    Status s = internal::ApplyObjectiveOptions(c_.objective, c_.p, c_.pending_penalty, cluster, &popt_.objective);
    if (!s.ok()) return s;
  }
  popt_.objective.rescale_cost_s =
      c_.penalty_cost_s >= 0.0 ? c_.penalty_cost_s
                               : (c_.rescale == RescaleMode::kRestart ? c_.restart_cost_s : c_.grow_cost_s);
  if (c_.weights == JobWeights::kRemaining) {
    popt_.objective.srpt_exponent = c_.srpt_exponent;
    popt_.objective.rescale_payback = c_.rescale_payback;
  }

  result_.jobs.resize(specs_.size());
  jobs_.resize(specs_.size());
  for (size_t i = 0; i < specs_.size(); ++i) {
    const JobSpec& s = specs_[i];
    auto it = apps_.find(s.app);
    if (it == apps_.end()) return Status(ErrorKind::kInvalidArgument, "job '" + s.name + "': unknown application '" + s.app + "'");
    SimJob& j = jobs_[i];
    j.spec = &s;
    j.app = it->second.get();
    j.res = &result_.jobs[i];
    j.res->name = s.name;
    j.res->app = s.app;
    j.res->arrival_s = s.arrival_s;
    j.target = j.app->TargetProgress();
    j.alloc.assign(static_cast<size_t>(c_.nodes), 0);
    const Application& a = *j.app;
    const int64_t req_batch = s.req_batch > 0 ? s.req_batch : a.init_batch;
    const int req_gpus = std::clamp(s.req_gpus, 1, capacity_);
    const bool pinned = std::find(c_.rigid_apps.begin(), c_.rigid_apps.end(), s.app) != c_.rigid_apps.end();
    if (rigid_) {
      j.min_gpus = j.max_gpus = req_gpus;
    } else {
      const int64_t batch_cap = frozen_ ? req_batch : a.max_batch;
      int mx = static_cast<int>(std::min<int64_t>(capacity_, std::max<int64_t>(1, batch_cap / a.min_local_batch)));
      if (c_.elastic_max_gpus > 0) mx = std::min(mx, c_.elastic_max_gpus);
      if (s.max_gpus > 0) mx = std::min(mx, s.max_gpus);
      if (pinned) mx = 1;
      j.min_gpus = 1;
      j.max_gpus = mx;
    }
    j.frozen = frozen_;
    j.fixed_batch = req_batch;
  }
  if (c_.fuse_max_per_gpu > 0) return SetupSweeps();
  return Status::Ok();
}

void Engine::Observe(SimJob& j, double step) {
  if (c_.model != ModelSource::kObserved || j.fused_width > 0) return;
  const int nodes = NodesOf(j.alloc);
  if (!j.seen.insert({nodes, j.gpus, j.local}).second) return;
  j.samples.push_back({nodes, j.gpus, static_cast<double>(j.local), step});
  j.max_observed = std::max(j.max_observed, j.gpus);
  j.dirty = true;
}

void Engine::Advance(SimJob& j, double t0, double dt) {
  if (j.done || j.gpus == 0) return;
  // GPUs held: a fused trial holds its share of its sweep's GPU.
  const double held = j.fused_width > 0 ? 1.0 / j.fused_width : static_cast<double>(j.gpus);
  double t = t0;
  const double d = std::min(j.pause, dt);
  j.pause -= d;
  t += d;
  j.res->gpu_seconds += d * held;
  double rem = dt - d;
  while (rem > 0.0 && !j.done) {
    double step = 0.0;
    const double rate = Rate(j, &step);
    Observe(j, step);
    const double next = j.app->ProgressAt(j.epoch + 1);
    if (j.progress + rate * rem < next) {
      j.progress += rate * rem;
      j.res->gpu_seconds += rem * held;
      return;
    }
    const double delta = std::max(0.0, (next - j.progress) / rate);
    j.progress = next;
    ++j.epoch;
    t += delta;
    rem -= delta;
    j.res->gpu_seconds += delta * held;
    if (j.epoch >= j.app->max_epochs || j.progress >= j.target) {
      j.done = true;
      j.res->finish_s = t;
    }
  }
}

// The job's option table for this epoch (explicit options; utility relative to min_gpus).
const std::vector<opt::Option>& Engine::Options(SimJob& j, double /*now*/) {
  const Application& a = *j.app;
  const double b_obs = j.gpus > 0 ? static_cast<double>(j.batch) : static_cast<double>(j.frozen ? j.fixed_batch : a.init_batch);
  const GradStats g = a.Stats(b_obs, j.epoch);
  int mx = j.max_gpus;
  if (c_.model == ModelSource::kObserved && !rigid_) mx = std::max(j.min_gpus, std::min(mx, 2 * j.max_observed));
  if (c_.model == ModelSource::kObserved && j.dirty) {
    Result<opt::PolluxParams> f = opt::FitPollux(j.samples);
    if (f.ok()) {
      j.fit = f.value();
      j.has_fit = true;
      j.cache_valid = false;
    }
    j.dirty = false;
  }
  if (j.cache_valid && g.sqr == j.cache_sqr && g.var == j.cache_var && mx == j.cache_max) return j.options;
  j.cache_valid = true;
  j.cache_sqr = g.sqr;
  j.cache_var = g.var;
  j.cache_max = mx;
  j.options.clear();

  opt::Job job;
  job.id = j.spec->name;
  job.min_gpus = j.min_gpus;
  job.max_gpus = mx;
  job.min_batch = j.frozen ? 1 : a.init_batch;  // frozen: the request, rounded down to whole local batches
  job.max_batch = j.frozen ? j.fixed_batch : std::max(a.max_batch, a.init_batch);
  job.min_local_batch = std::min(a.min_local_batch, job.min_batch);
  job.max_local_batch = a.max_local_batch;
  job.accumulation = true;
  if (c_.model == ModelSource::kObserved && !j.has_fit) {
    // Nothing observed yet: only the base size, at the smallest batch that fits.
    const int64_t b = std::max<int64_t>(job.min_batch, job.min_local_batch * j.min_gpus);
    j.options.push_back({c_.gpu_type, j.min_gpus, j.frozen ? j.fixed_batch : std::min(b, job.max_batch), 1.0});
    return j.options;
  }
  const opt::PolluxParams params = c_.model == ModelSource::kObserved ? j.fit : a.oracle_fit;
  auto tp = std::make_shared<opt::PolluxThroughput>(std::map<std::string, opt::PolluxParams>{{c_.gpu_type, params}});
  const opt::GoodputModel model(tp, {static_cast<double>(a.init_batch), g.sqr, g.var});
  const int gpn = c_.gpus_per_node;
  double base = 0.0;
  for (int n = j.min_gpus; n <= mx; ++n) {
    if (n != j.min_gpus && n != mx && n > gpn && n % gpn != 0) continue;  // whole nodes above one node
    const opt::Placement pl{c_.gpu_type, (n + gpn - 1) / gpn, n};
    std::optional<opt::BatchChoice> bc = j.frozen ? model.Evaluate(job, pl, j.fixed_batch) : model.BestBatch(job, pl);
    if (!bc || !(bc->goodput > 0.0)) continue;
    if (base == 0.0) {
      base = bc->goodput;
      j.base_goodput = base;
    }
    j.options.push_back({c_.gpu_type, n, bc->batch, bc->goodput / base});
  }
  return j.options;
}

double Engine::RestEstimate(const SimJob& j) const {
  // Remaining time at the job's request on whole nodes (FIFO's runtime estimate: exact).
  SimJob probe = j;
  if (probe.gpus == 0) {
    probe.gpus = j.min_gpus;
    std::fill(probe.alloc.begin(), probe.alloc.end(), 0);
    for (int left = probe.gpus, n = 0; left > 0 && n < c_.nodes; ++n) {
      probe.alloc[static_cast<size_t>(n)] = std::min(left, c_.gpus_per_node);
      left -= c_.gpus_per_node;
    }
    SplitBatch(*j.app, j.fixed_batch, probe.gpus, probe.local, probe.accum);
  }
  double t = probe.gpus == j.gpus ? j.pause : c_.start_cost_s;
  double progress = probe.progress;
  for (int e = probe.epoch; e < j.app->max_epochs; ++e) {
    probe.epoch = e;
    const double next = j.app->ProgressAt(e + 1);
    t += std::max(0.0, next - progress) / Rate(probe, nullptr);
    progress = next;
  }
  return t;
}

// FIFO with EASY backfill: the queue in arrival order; the head waits for a reservation
// (the earliest time enough running jobs end, by exact runtime estimates); later jobs start now
// when they fit and either end before the reservation or use GPUs it does not need.
std::vector<size_t> Engine::FifoAdmit(double /*now*/, const std::vector<size_t>& active) {
  std::vector<size_t> admitted;
  int free_gpus = capacity_;
  std::vector<std::pair<double, int>> ends;  // (time to end, GPUs) of running jobs
  std::vector<size_t> queue;
  for (size_t i : active) {
    if (jobs_[i].gpus > 0) {
      admitted.push_back(i);
      free_gpus -= jobs_[i].gpus;
      ends.emplace_back(RestEstimate(jobs_[i]), jobs_[i].gpus);
    } else {
      queue.push_back(i);
    }
  }
  std::stable_sort(queue.begin(), queue.end(), [&](size_t a, size_t b) { return specs_[a].arrival_s < specs_[b].arrival_s; });
  bool reserved = false;
  double shadow = 0.0;
  int extra = 0;
  for (size_t i : queue) {
    const int need = jobs_[i].min_gpus;
    if (!reserved) {
      if (need <= free_gpus) {
        admitted.push_back(i);
        free_gpus -= need;
        ends.emplace_back(RestEstimate(jobs_[i]), need);
        continue;
      }
      std::sort(ends.begin(), ends.end());
      int f = free_gpus;
      shadow = std::numeric_limits<double>::infinity();
      for (const auto& [t, g] : ends) {
        f += g;
        if (f >= need) {
          shadow = t;
          break;
        }
      }
      extra = f - need;
      reserved = true;
      continue;
    }
    if (need > free_gpus) continue;
    const double run = RestEstimate(jobs_[i]);
    if (run <= shadow) {
      admitted.push_back(i);
      free_gpus -= need;
    } else if (need <= extra) {
      admitted.push_back(i);
      free_gpus -= need;
      extra -= need;
    }
  }
  return admitted;
}

// Sticky placement: running holders (jobs, sweeps) keep their nodes (shrinking ones give back
// GPUs from their smallest slices), then growing and new ones, largest need first, take GPUs on
// nodes they already use, then whole free nodes, then the best-fitting node, then the freest nodes.
void Engine::Place(std::vector<Holder>& holders) {
  const auto gpn = c_.gpus_per_node;
  std::vector<int> free_gpus(static_cast<size_t>(c_.nodes), gpn);
  std::vector<size_t> grow;
  for (size_t k = 0; k < holders.size(); ++k) {
    std::vector<int>& alloc = *holders[k].alloc;
    const int want = holders[k].want;
    if (want == 0) {
      std::fill(alloc.begin(), alloc.end(), 0);
      continue;
    }
    int have = holders[k].have;
    ShrinkOnNodes(alloc, have, want);
    have = std::min(have, want);
    for (size_t n = 0; n < alloc.size(); ++n) free_gpus[n] -= alloc[n];
    if (want > have) grow.push_back(k);
  }
  std::stable_sort(grow.begin(), grow.end(), [&](size_t a, size_t b) {
    return holders[a].want - holders[a].have > holders[b].want - holders[b].have;
  });
  for (size_t k : grow) {
    std::vector<int>& alloc = *holders[k].alloc;
    int need = holders[k].want;
    for (int g : alloc) need -= g;
    GrowOnNodes(alloc, free_gpus, need, gpn);
  }
}

Status Engine::Schedule(double now, size_t epoch_index) {
  std::vector<size_t> active;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    SimJob& j = jobs_[i];
    if (j.done && j.gpus > 0) {  // finished during the last epoch: release its GPUs
      j.gpus = 0;
      j.fused_width = 0;
      std::fill(j.alloc.begin(), j.alloc.end(), 0);
    }
    if (!j.done && specs_[i].arrival_s <= now && j.sweep < 0) active.push_back(i);  // sweeps: AddSweepJobs
  }
  std::vector<size_t> considered = fifo_ ? FifoAdmit(now, active) : active;
  std::sort(considered.begin(), considered.end());

  opt::Snapshot snap;
  snap.cluster.types.push_back({c_.gpu_type, c_.nodes, c_.gpus_per_node});
  snap.jobs.reserve(considered.size());
  for (size_t i : considered) {
    SimJob& j = jobs_[i];
    opt::Job job;
    job.id = j.spec->name + "#" + std::to_string(i);
    job.min_gpus = j.min_gpus;
    job.max_gpus = std::max(j.max_gpus, j.gpus);
    job.options = Options(j, now);
    // The job's remaining time at its base size as the optimizer's own model estimates it (the
    // remaining-time objectives and the optimus policy use it; the others ignore it).
    if (j.base_goodput > 0.0) {
      job.remaining_s = std::clamp((j.target - j.progress) * static_cast<double>(j.app->init_batch) / j.base_goodput, 1.0,
                                   opt::kMaxRemainingInputS);
    }
    job.state = j.gpus > 0 ? opt::JobState::kRunning : opt::JobState::kPending;
    job.age_s = now - j.spec->arrival_s;
    job.rescales = j.res->rescales;
    if (j.gpus > 0) {
      int64_t b = j.batch;
      for (const opt::Option& o : job.options) {
        if (o.gpus == j.gpus) b = o.batch;  // the batch it would take at its size now: no penalty
      }
      job.current = opt::Configuration{c_.gpu_type, j.gpus, b};
    }
    snap.jobs.push_back(std::move(job));
  }
  std::vector<size_t> sweep_rows;
  if (!sweeps_.empty()) AddSweepJobs(now, sweep_rows, snap);
  std::vector<int> sweep_want(sweep_rows.size(), 0);
  std::vector<int> new_gpus(active.size(), 0);
  std::vector<int64_t> new_batch(active.size(), 0);
  double solve_ms = 0.0;
  if (!snap.jobs.empty()) {
    opt::PolicyOptions po = popt_;
    po.seed = c_.seed * 1000003ULL + epoch_index;
    Result<opt::Plan> plan = policy_->Solve(snap, po);
    if (!plan.ok()) return Status(ErrorKind::kInternal, "policy " + c_.policy + " at t=" + std::to_string(now) + ": " + plan.status().message());
    solve_ms = plan.value().solve_ms;
    int used = 0;
    for (size_t k = 0; k < considered.size(); ++k) {
      const opt::Assignment& a = plan.value().assignments[k];
      if (a.pending) continue;
      const size_t pos = static_cast<size_t>(std::find(active.begin(), active.end(), considered[k]) - active.begin());
      new_gpus[pos] = a.gpus;
      new_batch[pos] = a.batch > 0 ? a.batch : jobs_[considered[k]].fixed_batch;
      used += a.gpus;
    }
    for (size_t r = 0; r < sweep_rows.size(); ++r) {
      const opt::Assignment& a = plan.value().assignments[considered.size() + r];
      sweep_want[r] = a.pending ? 0 : a.gpus;
      used += sweep_want[r];
    }
    if (used > capacity_) return Status(ErrorKind::kInternal, "policy " + c_.policy + " used " + std::to_string(used) + " GPUs");
  }
  // Costs and counters, before placement changes j.gpus.
  std::vector<int> old_gpus(active.size());
  for (size_t k = 0; k < active.size(); ++k) old_gpus[k] = jobs_[active[k]].gpus;
  std::vector<Holder> holders;
  holders.reserve(active.size() + sweep_rows.size());
  for (size_t k = 0; k < active.size(); ++k) holders.push_back({&jobs_[active[k]].alloc, old_gpus[k], new_gpus[k]});
  for (size_t r = 0; r < sweep_rows.size(); ++r) {
    SimSweep& sw = sweeps_[sweep_rows[r]];
    holders.push_back({&sw.alloc, sw.gpus, sweep_want[r]});
  }
  Place(holders);
  std::vector<int> on_node(static_cast<size_t>(c_.nodes), 0);
  for (const Holder& h : holders) {
    for (size_t n = 0; n < on_node.size(); ++n) {
      on_node[n] += (*h.alloc)[n];
      if (on_node[n] > c_.gpus_per_node) {
        return Status(ErrorKind::kInternal, "placement at t=" + std::to_string(now) + " put " +
                                                std::to_string(on_node[n]) + " GPUs on node " + std::to_string(n));
      }
    }
  }
  int allocated = 0, running = 0, in_queue = static_cast<int>(active.size());
  for (size_t k = 0; k < active.size(); ++k) {
    SimJob& j = jobs_[active[k]];
    const int before = old_gpus[k], after = new_gpus[k];
    if (after > 0) {
      if (!j.started) {
        j.started = true;
        j.res->start_s = now;
        j.pause = c_.start_cost_s;
      } else if (before == 0) {
        ++j.res->rescales;  // resuming a preempted job is a checkpoint-restart
        j.pause = c_.restart_cost_s;
      } else if (before != after) {
        ++j.res->rescales;
        if (c_.rescale == RescaleMode::kRestart) j.pause = c_.restart_cost_s;
        else j.pause = std::max(j.pause, after > before ? c_.grow_cost_s : c_.shrink_cost_s);
      }
      j.gpus = after;
      j.batch = new_batch[k];
      SplitBatch(*j.app, j.batch, j.gpus, j.local, j.accum);
      j.res->max_gpus_used = std::max(j.res->max_gpus_used, after);
      j.res->last_batch = static_cast<int64_t>(j.local) * j.gpus * (j.accum + 1);
      allocated += after;
      ++running;
    } else {
      if (before > 0) ++j.res->rescales;  // preempted
      j.gpus = 0;
    }
  }
  if (!sweep_rows.empty()) ApplySweeps(now, sweep_rows, sweep_want, allocated, running, in_queue);
  result_.epochs.push_back({now, allocated, running, in_queue - running, solve_ms});
  result_.solve_ms_total += solve_ms;
  return Status::Ok();
}

Result<SimResult> Engine::Run() {
  const auto wall0 = std::chrono::steady_clock::now();
  if (Status s = Setup(); !s.ok()) return s;
  result_.total_gpus = capacity_;
  const double P = c_.period_s;
  double t = 0.0;
  size_t epoch = 0, finished = 0;
  std::vector<size_t> order(jobs_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  while (finished < jobs_.size() && t < c_.max_time_s) {
    // Idle cluster: jump to the epoch at or after the next arrival.
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
        epoch += static_cast<size_t>(k * P / P - t / P);
        t = k * P;
      }
    }
    if (Status s = Schedule(t, epoch); !s.ok()) return s;
    for (SimJob& j : jobs_) Advance(j, t, P);
    t += P;
    ++epoch;
    finished = 0;
    for (const SimJob& j : jobs_) finished += j.done ? 1 : 0;
    if (c_.progress) c_.progress(t, finished, jobs_.size());
  }
  result_.end_s = t;
  result_.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
  return std::move(result_);
}

}  // namespace internal

using internal::Engine;

Result<SimResult> Simulate(const AppTable& apps, const std::vector<JobSpec>& jobs, const SimConfig& config) {
  Engine e(apps, jobs, config);
  return e.Run();
}

Result<SimResult> SimulateIsolated(const AppTable& apps, const std::vector<JobSpec>& jobs, const SimConfig& config) {
  const auto wall0 = std::chrono::steady_clock::now();
  SimResult all;
  all.total_gpus = 0;  // no utilisation: the jobs do not share the cluster
  SimConfig one = config;
  one.progress = nullptr;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Result<SimResult> r = Simulate(apps, {jobs[i]}, one);
    if (!r.ok()) return r.status();
    all.jobs.push_back(r.value().jobs.front());
    all.end_s = std::max(all.end_s, r.value().end_s);
    all.solve_ms_total += r.value().solve_ms_total;
    if (config.progress) config.progress(all.end_s, i + 1, jobs.size());
  }
  all.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
  return all;
}

}  // namespace elastic::simulator
