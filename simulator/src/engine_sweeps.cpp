// Fused sweeps in the simulation engine (SimConfig::fuse_max_per_gpu; docs/simulator.md,
// "Fused sweeps"): each sweep is one job to the optimizer, whose options are its best
// (GPUs, trials per GPU) per GPU count (optimizer/fusion.h); after the plan, the sweep holds its
// GPUs as a job does and its trials train on them, w to a GPU, each at speedup(w) / w of its
// speed alone, each counting 1/w of its GPU's time.
#include <algorithm>
#include <map>

#include "engine.h"

namespace elastic::simulator::internal {
namespace {

// Where a trial trains after a plan: its GPU among the sweep's (-1: it waits), that GPU's
// width, and whether its fused model is (re)built now (a start, a move, a resume or a widening).
struct Seat {
  int gpu = -1;
  int width = 0;
  bool rebuilt = false;
};

// The trials' seats for `choice`, from the GPU each running trial trained on (`old_gpu`, -1: none;
// trials in arrival order). Each GPU of the plan takes over the trials of one fused array of the
// last plan: one of its width first (nothing changes), then the largest left. An array larger than
// its new GPU's width keeps its first trials and the others leave it (as ended trials leave a fused
// array: the rest go on without a restart); one smaller is widened (rebuilt, all its trials pay a
// restart). Trials without a seat (running ones first, in arrival order) fill the places left.
std::vector<Seat> AssignSeats(const opt::FusedChoice& choice, const std::vector<int>& old_gpu) {
  std::map<int, std::vector<size_t>> arrays;  // old GPU -> its trials
  for (size_t k = 0; k < old_gpu.size(); ++k) {
    if (old_gpu[k] >= 0) arrays[old_gpu[k]].push_back(k);
  }
  std::vector<std::vector<size_t>> left;  // arrays in the order of their first trial
  for (auto& [g, ks] : arrays) left.push_back(std::move(ks));
  std::sort(left.begin(), left.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  const size_t G = choice.per_gpu.size();
  std::vector<int> taken(G, -1);  // the array each new GPU takes over
  std::vector<bool> used(left.size(), false);
  for (size_t g = 0; g < G; ++g) {
    for (size_t a = 0; a < left.size() && taken[g] < 0; ++a) {
      if (!used[a] && static_cast<int>(left[a].size()) == choice.per_gpu[g]) {
        taken[g] = static_cast<int>(a);
        used[a] = true;
      }
    }
  }
  for (size_t g = 0; g < G; ++g) {
    size_t best = left.size();
    for (size_t a = 0; a < left.size(); ++a) {
      if (!used[a] && (best == left.size() || left[a].size() > left[best].size())) best = a;
    }
    if (taken[g] >= 0 || best == left.size()) continue;
    taken[g] = static_cast<int>(best);
    used[best] = true;
  }
  std::vector<Seat> seats(old_gpu.size());
  std::vector<int> room(G, 0);
  for (size_t g = 0; g < G; ++g) {
    const int w = choice.per_gpu[g];
    room[g] = w;
    if (taken[g] < 0) continue;
    const std::vector<size_t>& ks = left[static_cast<size_t>(taken[g])];
    const bool widened = static_cast<int>(ks.size()) < w;
    for (size_t i = 0; i < ks.size() && room[g] > 0; ++i, --room[g]) seats[ks[i]] = {static_cast<int>(g), w, widened};
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < old_gpu.size(); ++k) {
      if (seats[k].gpu >= 0 || (pass == 0) != (old_gpu[k] >= 0)) continue;
      for (size_t g = 0; g < G; ++g) {
        if (room[g] == 0) continue;
        seats[k] = {static_cast<int>(g), choice.per_gpu[g], true};
        --room[g];
        break;
      }
    }
  }
  return seats;
}

}  // namespace

Status Engine::SetupSweeps() {
  if (fifo_) {
    return Status(ErrorKind::kInvalidArgument,
                  "fused sweeps need an optimizer policy (a sweep's GPUs and trials per GPU are its choice); fifo runs "
                  "every job as requested: drop --fuse or choose another policy");
  }
  if (c_.weights != JobWeights::kUniform) {
    return Status(ErrorKind::kInvalidArgument, "fused sweeps are weighted uniformly: use --weights uniform with --fuse");
  }
  opt::FusionProfile given;
  if (!c_.fuse_profile.empty()) {
    Result<opt::FusionProfile> p = opt::ParseFusionProfile(c_.fuse_profile);
    if (!p.ok()) return Status(ErrorKind::kInvalidArgument, "--fuse-profile: " + p.status().message());
    given = std::move(p).value();
    if (given.max_width() > c_.fuse_max_per_gpu) given.speedup.resize(static_cast<size_t>(c_.fuse_max_per_gpu));
  }
  const std::vector<int> group = GroupSweeps(specs_, c_.sweep_rule);
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] < 0) continue;
    const auto g = static_cast<size_t>(group[i]);
    if (sweeps_.size() <= g) sweeps_.resize(g + 1);
    sweeps_[g].trials.push_back(i);
    jobs_[i].sweep = group[i];
  }
  for (SimSweep& sw : sweeps_) {
    std::stable_sort(sw.trials.begin(), sw.trials.end(),
                     [&](size_t a, size_t b) { return specs_[a].arrival_s < specs_[b].arrival_s; });
    sw.alloc.assign(static_cast<size_t>(c_.nodes), 0);
    if (!c_.fuse_profile.empty()) {
      sw.profile = given;
      continue;
    }
    const SimJob& first = jobs_[sw.trials.front()];
    const Application& app = *first.app;
    int64_t local = 0;
    int accum = 0;
    SplitBatch(app, first.fixed_batch, 1, local, accum);
    static const std::vector<int> kOneGpu{1};
    sw.profile = opt::ProfileFromStepTimes(
        app.name, [&](double b) { return app.StepTime(kOneGpu, b).step; }, static_cast<double>(local),
        static_cast<double>(app.max_local_batch), c_.fuse_max_per_gpu);
    if (Status st = opt::ValidateFusionProfile(sw.profile); !st.ok()) {
      return Status(ErrorKind::kInvalidArgument, "the step times of " + app.name + " give no fusion profile: " + st.message());
    }
  }
  return Status::Ok();
}

void Engine::AddSweepJobs(double now, std::vector<size_t>& rows, opt::Snapshot& snap) {
  for (size_t s = 0; s < sweeps_.size(); ++s) {
    SimSweep& sw = sweeps_[s];
    int waiting = 0;  // trials arrived and not done
    int running = 0;
    for (size_t i : sw.trials) {
      waiting += !jobs_[i].done && specs_[i].arrival_s <= now ? 1 : 0;
      running += !jobs_[i].done && jobs_[i].fused_width > 0 ? 1 : 0;
    }
    if (waiting == 0) {  // none yet, or all done: the sweep holds nothing
      std::fill(sw.alloc.begin(), sw.alloc.end(), 0);
      sw.gpus = 0;
      continue;
    }
    sw.choices = opt::SweepChoices(sw.profile, waiting, capacity_, c_.fuse_max_per_gpu);
    opt::Job job;
    job.id = "sweep-" + specs_[sw.trials.front()].name + "#s" + std::to_string(s);
    // A running sweep's base size, which keep_running guarantees as a job's: the GPUs its running
    // trials need at the widest fusion (trials already training are not preempted for others).
    const int W = std::min(c_.fuse_max_per_gpu, sw.profile.max_width());
    job.min_gpus = std::max(1, std::min((running + W - 1) / W, static_cast<int>(sw.choices.size())));
    job.max_gpus = std::max(std::min(waiting, capacity_), sw.gpus);
    for (const opt::Option& o : opt::SweepOptions(sw.choices, c_.gpu_type)) {
      if (o.gpus >= job.min_gpus) job.options.push_back(o);
    }
    job.state = sw.gpus > 0 ? opt::JobState::kRunning : opt::JobState::kPending;
    job.age_s = now - specs_[sw.trials.front()].arrival_s;
    job.rescales = sw.rescales;
    if (sw.gpus > 0) job.current = opt::Configuration{c_.gpu_type, sw.gpus, 0};
    snap.jobs.push_back(std::move(job));
    rows.push_back(s);
  }
}

void Engine::ApplySweeps(double now, const std::vector<size_t>& rows, const std::vector<int>& want, int& allocated,
                         int& running, int& active) {
  for (size_t r = 0; r < rows.size(); ++r) {
    SimSweep& sw = sweeps_[rows[r]];
    std::vector<size_t> trials;
    std::vector<int> old_gpu;
    for (size_t i : sw.trials) {
      if (jobs_[i].done || specs_[i].arrival_s > now) continue;
      trials.push_back(i);
      old_gpu.push_back(jobs_[i].fused_width > 0 ? jobs_[i].fused_gpu : -1);
    }
    active += static_cast<int>(trials.size());
    if (sw.gpus > 0 && want[r] != sw.gpus) ++sw.rescales;
    sw.gpus = want[r];
    allocated += sw.gpus;
    const opt::FusedChoice* choice = sw.gpus > 0 ? opt::FusedChoiceFor(sw.choices, sw.gpus) : nullptr;
    const std::vector<Seat> seats = choice ? AssignSeats(*choice, old_gpu) : std::vector<Seat>(trials.size());
    for (size_t k = 0; k < trials.size(); ++k) {
      SimJob& j = jobs_[trials[k]];
      if (seats[k].gpu < 0) {
        if (old_gpu[k] >= 0) ++j.res->rescales;  // preempted
        j.gpus = 0;
        j.fused_width = 0;
        j.fused_gpu = -1;
        continue;
      }
      if (!j.started) {
        j.started = true;
        j.res->start_s = now;
        j.pause = c_.start_cost_s;
      } else if (seats[k].rebuilt) {
        // Moved, resumed or widened: the fused model is rebuilt from the trials' own checkpoints.
        ++j.res->rescales;
        j.pause = c_.restart_cost_s;
      }
      j.fused_gpu = seats[k].gpu;
      j.fused_width = seats[k].width;
      j.fuse_speed = sw.profile.Speedup(seats[k].width) / seats[k].width;
      j.gpus = 1;
      j.batch = j.fixed_batch;
      SplitBatch(*j.app, j.batch, 1, j.local, j.accum);
      j.res->max_gpus_used = std::max(j.res->max_gpus_used, 1);
      j.res->last_batch = static_cast<int64_t>(j.local) * (j.accum + 1);
      ++running;
    }
  }
}

}  // namespace elastic::simulator::internal
