#include "elastic/report/report.h"

#include "elastic/report/sweeps.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "elastic/report/period.h"

namespace elastic::report {
namespace {

double Overlap(double a0, double a1, double b0, double b1) { return std::max(0.0, std::min(a1, b1) - std::max(a0, b0)); }

// The allocation's run interval [start, end] (end: now while it runs) and the factor that turns
// wall seconds into sacct's elapsed seconds (suspended time is not elapsed).
struct Run {
  double start = 0, end = 0, scale = 0;
};
Run RunOf(const SacctRecord& r, double now) {
  Run run;
  if (r.start <= 0) return run;
  run.start = r.start;
  run.end = r.end > 0 ? r.end : std::max(r.start, now);
  double wall = run.end - run.start;
  run.scale = wall > 0 ? std::min(1.0, static_cast<double>(r.elapsed_s) / wall) : 0.0;
  return run;
}

// Elapsed seconds of the allocation that count: inside the period, or all of them.
double CountedSeconds(const SacctRecord& r, const ReportOptions& o) {
  if (!o.clip) return static_cast<double>(r.elapsed_s);
  Run run = RunOf(r, o.now);
  if (run.end <= run.start) return 0.0;
  return Overlap(run.start, run.end, o.since, o.until) * run.scale;
}

std::string KeyOf(const JobUsage& j, GroupBy by) {
  switch (by) {
    case GroupBy::kAccount: return j.account;
    case GroupBy::kUser: return j.user;
    case GroupBy::kPartition: return j.partition;
    case GroupBy::kJob: return j.job_id;
  }
  return j.account;
}

void AddTo(GroupRow& g, const JobUsage& j) {
  g.jobs += 1;
  g.elastic_jobs += j.elastic ? 1 : 0;
  g.extensions += j.extensions;
  g.gpu_hours += (j.base_gpu_s + j.extension_gpu_s) / 3600.0;
  g.extension_gpu_hours += j.extension_gpu_s / 3600.0;
  g.rescales += j.rescales;
  g.rescale_pause_s += j.pause_s;
  g.job_hours += j.run_s / 3600.0;
  g.peak_job_gpus = std::max(g.peak_job_gpus, j.peak_gpus);
  for (double w : j.queue_waits_s) {
    g.queue_wait_mean_s += w;  // a sum until Finish()
    g.queue_wait_max_s = std::max(g.queue_wait_max_s, w);
    g.started += 1;
  }
  if (j.saved_s) g.time_saved_h += *j.saved_s / 3600.0;
}

void Finish(GroupRow& g) {
  g.extension_share = g.gpu_hours > 0 ? g.extension_gpu_hours / g.gpu_hours : 0.0;
  g.avg_job_gpus = g.job_hours > 0 ? g.gpu_hours / g.job_hours : 0.0;
  g.queue_wait_mean_s = g.started > 0 ? g.queue_wait_mean_s / g.started : 0.0;
}

// Base plus the most extension GPUs held at once.
int64_t Peak(int64_t base, std::vector<std::pair<double, int64_t>> events) {
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;  // ends before starts
  });
  int64_t level = 0, peak = 0;
  for (const auto& [t, d] : events) {
    level += d;
    peak = std::max(peak, level);
  }
  return base + peak;
}

// Time saved against running rigid at the base size (docs/report.md): the work done in the
// period, in seconds at the base size, minus the wall time it took.
void EstimateSaved(JobUsage& u, const JournalJob* jj, const std::vector<Interval>& intervals,
                   const std::vector<Rescale>& rescales, const ReportOptions& o) {
  int base = jj && jj->base_gpus > 0 ? jj->base_gpus : static_cast<int>(u.base_gpus);
  if (base <= 0 || intervals.empty()) return;
  static const std::vector<StepSample> kNone;
  const std::vector<StepSample>& samples = jj ? jj->samples : kNone;
  double lo = o.clip ? o.since : -INFINITY, hi = o.clip ? o.until : INFINITY;
  double work = 0, wall = 0;
  bool any_measured = false, any_linear = false;
  auto speed = [&](int gpus) {
    bool measured = false;
    double s = RelativeSpeed(samples, base, gpus, &measured);
    if (gpus != base) (measured ? any_measured : any_linear) = true;
    return s;
  };
  for (const Interval& iv : intervals) {
    double end = iv.end > 0 ? iv.end : o.now;
    double dt = Overlap(iv.start, end, lo, hi);
    if (dt <= 0 || iv.gpus <= 0) continue;
    wall += dt;
    work += dt * speed(iv.gpus);
  }
  for (const Rescale& r : rescales) {
    if (!r.ok || r.done_at <= 0 || r.done_at < lo || r.done_at > hi) continue;
    work -= r.pause_s * speed(r.from_gpus);  // no progress while paused
  }
  if (wall <= 0) return;
  u.saved_s = work - wall;
  u.saved_method = any_measured && any_linear ? "mixed" : any_linear ? "linear" : "measured";
}

}  // namespace

Result<GroupBy> ParseGroupBy(std::string_view text) {
  if (text == "account") return GroupBy::kAccount;
  if (text == "user") return GroupBy::kUser;
  if (text == "partition") return GroupBy::kPartition;
  if (text == "job") return GroupBy::kJob;
  return Status(ErrorKind::kInvalidArgument,
                "--by: unknown grouping '" + std::string(text) + "'; expected account, user, partition or job");
}

std::string_view GroupByName(GroupBy by) {
  switch (by) {
    case GroupBy::kAccount: return "account";
    case GroupBy::kUser: return "user";
    case GroupBy::kPartition: return "partition";
    case GroupBy::kJob: return "job";
  }
  return "account";
}

double RelativeSpeed(const std::vector<StepSample>& samples, int base_gpus, int gpus, bool* measured) {
  auto throughput = [&](int n) {
    double sum = 0;
    int count = 0;
    for (const auto& s : samples) {
      if (s.gpus == n) {
        sum += s.gpus * s.local_batch / s.step_time_s;
        ++count;
      }
    }
    return count > 0 ? sum / count : 0.0;
  };
  if (gpus == base_gpus) {
    if (measured) *measured = true;
    return 1.0;
  }
  double xb = throughput(base_gpus), xn = throughput(gpus);
  if (xb > 0 && xn > 0) {
    if (measured) *measured = true;
    return xn / xb;
  }
  if (measured) *measured = false;
  return base_gpus > 0 ? static_cast<double>(gpus) / base_gpus : 1.0;
}

Report BuildReport(const std::vector<SacctRecord>& sacct, const Journal* journal, const ReportOptions& o) {
  Report rep;
  rep.options = o;
  rep.have_journal = journal != nullptr;
  if (journal) rep.warnings = journal->warnings;
  std::map<uint64_t, JobUsage> by_number;   // jobs with numeric ids (every parent has one)
  std::map<std::string, JobUsage> by_text;  // ids that are not plain numbers (kept apart, never parents)
  std::map<uint64_t, std::vector<std::pair<double, int64_t>>> ext_events;
  // Accounts per time bucket.
  TimeSeries& ts = rep.series;
  ts.start = o.since;
  ts.bucket_s = o.until - o.since <= 2 * 86400 ? 3600 : 86400;
  ts.buckets = static_cast<size_t>(std::max(1.0, std::ceil((o.until - o.since) / ts.bucket_s)));
  auto add_series = [&](const std::string& account, const SacctRecord& r) {
    Run run = RunOf(r, o.now);
    if (run.end <= run.start || r.gpus <= 0) return;
    auto& v = ts.gpu_hours[account];
    v.resize(ts.buckets, 0.0);
    for (size_t b = 0; b < ts.buckets; ++b) {
      double b0 = ts.start + static_cast<double>(b) * ts.bucket_s;
      double b1 = std::min(o.until, b0 + ts.bucket_s);
      v[b] += static_cast<double>(r.gpus) * Overlap(run.start, run.end, b0, b1) * run.scale / 3600.0;
    }
  };

  // Pass 1: the jobs' own allocations (rigid jobs and elastic parents).
  for (const SacctRecord& r : sacct) {
    if (r.extension) continue;
    if (r.gpus <= 0) continue;  // no GPUs: not part of a GPU report
    if (r.named_extension) {
      rep.warnings.push_back("job " + r.job_id + " is named '" + r.name +
                             "' but has no elastic-ext admin comment: counted as an ordinary job of account " +
                             r.account);
    }
    JobUsage& u = r.job_number ? by_number[r.job_number] : by_text[r.job_id];
    if (u.job_id.empty()) {
      u.id = r.job_number;
      u.job_id = r.display_id;  // array tasks as sacct and squeue name them (12_0)
      u.name = r.name;
      u.user = r.user;
      u.account = r.account;
      u.partition = r.partition;
    }
    u.base_gpus = std::max(u.base_gpus, r.gpus);
    double secs = CountedSeconds(r, o);
    u.base_gpu_s += static_cast<double>(r.gpus) * secs;
    u.run_s += secs;
    if (r.start > 0 && r.start >= o.since && r.start <= o.until) {
      double eligible = r.eligible > 0 ? r.eligible : r.submit;
      if (eligible > 0) u.queue_waits_s.push_back(std::max(0.0, r.start - eligible));
    }
    add_series(r.account, r);
  }
  // Pass 2: extensions, added to their parent.
  for (const SacctRecord& r : sacct) {
    if (!r.extension) continue;
    JobUsage& u = by_number[r.parent];
    if (u.job_id.empty()) {
      u.id = r.parent;
      u.job_id = std::to_string(r.parent);
      const JournalJob* jj = nullptr;
      if (journal) {
        auto it = journal->jobs.find(r.parent);
        if (it != journal->jobs.end()) jj = &it->second;
      }
      u.user = jj ? jj->user : r.user;
      u.account = jj ? jj->account : r.account;
      u.partition = jj && !jj->partition.empty() ? jj->partition : r.partition;
      u.base_gpus = jj ? jj->base_gpus : 0;
      rep.warnings.push_back("extension job " + r.job_id + " names parent " + std::to_string(r.parent) +
                             ", which sacct does not list for the period: attributed to job " +
                             std::to_string(r.parent) + " of account " + u.account +
                             (jj ? " (from the journal)" : " (the extension's own account)"));
    }
    if (u.account != r.account || u.user != r.user) {
      rep.warnings.push_back("extension job " + r.job_id + " runs under " + r.user + "/" + r.account +
                             " but its parent " + u.job_id + " under " + u.user + "/" + u.account +
                             ": attributed to the parent");
    }
    u.elastic = true;
    if (r.gpus <= 0) continue;
    u.extensions += 1;
    u.extension_gpu_s += static_cast<double>(r.gpus) * CountedSeconds(r, o);
    Run run = RunOf(r, o.now);
    if (run.end > run.start) {
      ext_events[r.parent].push_back({run.start, r.gpus});
      ext_events[r.parent].push_back({run.end, -r.gpus});
    }
    add_series(u.account, r);
  }

  // Journal: elastic flag, rescales, pauses, time saved.
  std::vector<JobUsage> jobs;
  for (auto& [id, u] : by_number) {
    auto ev = ext_events.find(id);
    u.peak_gpus = ev == ext_events.end() ? u.base_gpus : Peak(u.base_gpus, ev->second);
    if (journal) {
      auto jit = journal->jobs.find(id);
      const JournalJob* jj = jit == journal->jobs.end() ? nullptr : &jit->second;
      if (jj) u.elastic = true;
      std::vector<Interval> ivs;
      for (const auto& iv : journal->intervals) {
        if (iv.job == id) ivs.push_back(iv);
      }
      std::vector<Rescale> rs;
      for (const auto& r : journal->rescales) {
        if (r.job != id) continue;
        rs.push_back(r);
        bool in = !o.clip || (r.done_at >= o.since && r.done_at <= o.until);
        if (r.ok && r.done_at > 0 && in) {
          u.rescales += 1;
          u.pause_s += r.pause_s;
        }
      }
      if (u.elastic) EstimateSaved(u, jj, ivs, rs, o);
    }
    jobs.push_back(std::move(u));
  }
  for (auto& [id, u] : by_text) jobs.push_back(std::move(u));

  std::map<std::string, GroupRow> groups;
  for (const JobUsage& u : jobs) {
    std::string key = KeyOf(u, o.by);
    GroupRow& g = groups[key];
    g.group = key;
    AddTo(g, u);
    AddTo(rep.total, u);
  }
  rep.total.group = "TOTAL";
  Finish(rep.total);
  for (auto& [k, g] : groups) {
    Finish(g);
    rep.groups.push_back(g);
  }
  if (o.by == GroupBy::kJob) {
    // Numerically, an array's tasks (12_0, 12_1, ..., 12_10) after job 12 and in task order.
    auto parts = [](const std::string& id) {
      const size_t us = id.find('_');
      const std::string job = id.substr(0, us), task = us == std::string::npos ? "" : id.substr(us + 1);
      return std::make_tuple(job.size(), job, task.size(), task);
    };
    std::stable_sort(rep.groups.begin(), rep.groups.end(),
                     [&](const GroupRow& a, const GroupRow& b) { return parts(a.group) < parts(b.group); });
  }
  rep.jobs = std::move(jobs);
  if (journal) rep.sweeps = SplitSweeps(rep.jobs, *journal);
  return rep;
}

Result<JobTimeline> BuildJobTimeline(uint64_t job, const std::vector<SacctRecord>& sacct, const Journal* journal,
                                     double now) {
  JobTimeline tl;
  tl.job = job;
  if (journal) {
    std::vector<Interval> ivs;
    for (const auto& iv : journal->intervals) {
      if (iv.job == job) ivs.push_back(iv);
    }
    if (!ivs.empty()) {
      tl.source = "journal";
      for (size_t i = 0; i < ivs.size(); ++i) {
        const Interval& iv = ivs[i];
        double end = iv.end > 0 ? iv.end : now;
        if (!tl.steps.empty() && tl.steps.back().first == iv.start && tl.steps.back().second == 0) {
          tl.steps.back().second = iv.gpus;
        } else {
          tl.steps.push_back({iv.start, iv.gpus});
        }
        tl.steps.push_back({end, 0});
      }
      return tl;
    }
  }
  // From sacct: the job's own allocations plus its extensions, as a sweep over their edges.
  std::vector<std::pair<double, int64_t>> events;
  for (const auto& r : sacct) {
    bool own = !r.extension && r.job_number == job;
    bool ext = r.extension && r.parent == job;
    if ((!own && !ext) || r.start <= 0 || r.gpus <= 0) continue;
    double end = r.end > 0 ? r.end : now;
    events.push_back({r.start, r.gpus});
    events.push_back({end, -r.gpus});
  }
  if (events.empty()) {
    return Status(ErrorKind::kNotFound, "--job " + std::to_string(job) +
                                            ": neither the journal nor sacct has GPU allocations of that job in the period");
  }
  tl.source = "sacct";
  std::sort(events.begin(), events.end());
  int64_t level = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    level += events[i].second;
    if (i + 1 < events.size() && events[i + 1].first == events[i].first) continue;
    tl.steps.push_back({events[i].first, level});
  }
  return tl;
}

}  // namespace elastic::report
