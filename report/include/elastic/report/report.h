// The aggregation: per job, then per group (account, user, partition or job), over a period.
//
// GPU-hours come from sacct alone: gres/gpu of AllocTRES x ElapsedRaw for every allocation,
// extensions added to their parent's job, account, user and partition. With clipping (the
// default) only the part of each allocation inside [since, until] counts. The journal adds what
// Slurm does not know: rescales, their pauses and the estimated time saved (docs/report.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/report/journal.h"
#include "elastic/report/sacct.h"

namespace elastic::report {

enum class GroupBy { kAccount, kUser, kPartition, kJob };
Result<GroupBy> ParseGroupBy(std::string_view text);
std::string_view GroupByName(GroupBy by);

struct ReportOptions {
  double since = 0, until = 0;  // the period, seconds since the epoch
  double now = 0;               // end of still-running allocations and open intervals
  GroupBy by = GroupBy::kAccount;
  bool clip = true;             // count only the part of each allocation inside the period
};

// One job as the report sees it: a rigid job, or an elastic job with its extensions.
struct JobUsage {
  uint64_t id = 0;
  std::string job_id;  // as sacct prints it
  std::string name, user, account, partition;
  bool elastic = false;       // registered with elasticd, or has extensions
  int64_t base_gpus = 0;      // GPUs of the job's own allocation
  int64_t peak_gpus = 0;      // base plus the most extension GPUs held at one time
  int extensions = 0;         // extension jobs that ran in the period
  double base_gpu_s = 0;      // GPU-seconds of the job's own allocation(s)
  double extension_gpu_s = 0; // GPU-seconds of its extension jobs
  double run_s = 0;           // the job's own run time (in the period)
  std::vector<double> queue_waits_s;  // start - eligible of each allocation that started in the period
  int rescales = 0;           // successful rescales finished in the period (journal)
  double pause_s = 0;         // time paused by them
  std::optional<double> saved_s;  // estimated time saved against rigid at base size (journal)
  std::string saved_method;   // "measured", "linear", "mixed" (docs/report.md)
};

// A fused sweep's trials and their GPU-hours (sweeps.h has the rule).
struct TrialUsage {
  uint32_t task = 0;
  std::string job_id;       // the task as sacct names it ("12_3")
  int64_t steps = 0;        // trial-steps it consumed in the leader (0: not reported)
  std::string state;        // finished, stopped, diverged; "" when the leader did not report it
  std::string result;       // where its result is, as the leader reported it
  double own_gpu_s = 0;     // its task's own allocations (never the leader's)
  double fused_gpu_s = 0;   // its share of the leader's GPU-seconds
  double GpuHours() const { return (own_gpu_s + fused_gpu_s) / 3600.0; }
};

struct SweepUsage {
  uint64_t array_job = 0;
  uint64_t leader = 0;
  std::string account, user;
  double leader_gpu_s = 0;  // the leader's allocation and its extensions
  double array_gpu_s = 0;   // sacct's GPU-seconds of the array's tasks and the leader's extensions
  std::vector<TrialUsage> trials;  // by task index
};

struct GroupRow {
  std::string group;
  int jobs = 0, elastic_jobs = 0, extensions = 0;
  double gpu_hours = 0, extension_gpu_hours = 0;
  double extension_share = 0;  // extension_gpu_hours / gpu_hours (0 when no GPU-hours)
  int rescales = 0;
  double rescale_pause_s = 0;
  double job_hours = 0;        // jobs' own run time
  double avg_job_gpus = 0;     // GPU-hours / job-hours: time-weighted mean size
  int64_t peak_job_gpus = 0;
  double queue_wait_mean_s = 0, queue_wait_max_s = 0;
  int started = 0;             // allocations whose queue wait counts
  double time_saved_h = 0;     // sum over elastic jobs with an estimate
};

struct TimeSeries {  // GPU-hours per account and time bucket, for the HTML chart
  double start = 0, bucket_s = 3600;
  size_t buckets = 0;
  std::map<std::string, std::vector<double>> gpu_hours;  // account -> per bucket
};

struct Report {
  ReportOptions options;
  std::vector<JobUsage> jobs;     // ordered by id
  std::vector<GroupRow> groups;   // ordered by group key (numerically for --by job)
  GroupRow total;
  TimeSeries series;
  std::vector<std::string> warnings;
  bool have_journal = false;
  std::vector<SweepUsage> sweeps;  // fused sweeps (journal only), by array id
};

// Builds the report. `journal` may be null (sacct only: no rescales, no time saved).
Report BuildReport(const std::vector<SacctRecord>& sacct, const Journal* journal, const ReportOptions& options);

// One job's GPU count over time: steps (time, gpus), the last one at the job's end with 0 GPUs.
struct JobTimeline {
  uint64_t job = 0;
  std::string source;  // "journal" (intervals table) or "sacct" (base + extension allocations)
  std::vector<std::pair<double, int64_t>> steps;
};
// From the journal's intervals when it has the job, else from sacct's allocations of the job and
// its extensions. kNotFound when neither knows the job.
Result<JobTimeline> BuildJobTimeline(uint64_t job, const std::vector<SacctRecord>& sacct, const Journal* journal,
                                     double now);

// Speed of a job at `gpus` relative to `base_gpus` from its step-time samples: the ratio of
// measured throughputs (samples/s, averaged per GPU count) when both sizes were measured, else
// gpus / base_gpus (linear scaling, an upper bound). `measured` tells which.
double RelativeSpeed(const std::vector<StepSample>& samples, int base_gpus, int gpus, bool* measured);

}  // namespace elastic::report
