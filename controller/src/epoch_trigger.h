// When the next scheduling epoch runs: at the latest `scheduler.epoch` seconds after the last
// one, and sooner when something happened that the plan should react to (a job was submitted,
// started or ended in Slurm; an elastic job registered or reported its first step; a rescale
// finished or a group left). Events are coalesced: an event epoch runs at most once per
// `scheduler.event_min_gap` seconds, so a burst of submissions costs one epoch, not one each.
// Pure logic on a caller-supplied clock (seconds); elasticd_main.cpp drives it with a timer.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "slurm_adapter.h"

namespace elastic::controller {

class EpochTrigger {
 public:
  EpochTrigger(double period_s, double min_gap_s) : period_s_(period_s), min_gap_s_(min_gap_s) {}
  void SetTimes(double period_s, double min_gap_s) {
    period_s_ = period_s;
    min_gap_s_ = min_gap_s;
  }

  // Something happened; `why` is kept for the log line of the epoch it triggers.
  void Notify(const std::string& why);
  // Something will be possible at `when` (e.g. a job may rescale again): an event then. The
  // earliest such time is kept.
  void NotifyAt(double when, const std::string& why);
  // Whether an epoch is due at `now`, and why ("period" or the events, comma-separated).
  bool Due(double now, std::string* why) const;
  // An epoch ran (started) at `now`: pending events are consumed.
  void Ran(double now);
  // Seconds from `now` until Due() could first become true (0: due now); with no event pending,
  // until the period ends.
  double SecondsUntilDue(double now) const;
  bool pending() const { return !events_.empty(); }

 private:
  double period_s_;
  double min_gap_s_;
  double last_run_ = -1e300;  // never ran: the first call of Due() is true
  std::set<std::string> events_;
  double timed_at_ = 0;  // 0: no timed event
  std::string timed_why_;
};

// A job's phase as the watch sees it. An ended job is `kCompleting` while Slurm still ends its
// processes and runs its epilog: its nodes are not free yet, so that they become free (the job
// "released its nodes") is an event of its own, or a grow that waited for them would wait for the
// next periodic epoch.
enum class JobPhase { kPending, kRunning, kSuspended, kCompleting, kEnded };
// A summary of the job table for the watch between epochs: the jobs that are not elastic
// extensions, with their phase. Two tables with the same summary differ in nothing an epoch
// reacts to (a pending reason, a priority, a running job's usage).
using JobTableSummary = std::vector<std::pair<uint32_t, JobPhase>>;
JobTableSummary SummarizeJobs(const std::vector<JobInfo>& jobs);
// What changed between two summaries, for the log: e.g. "job 12 submitted", "job 9 started",
// "job 7 ended", "job 7 released its nodes"; at most `limit` items, then "and N more". Empty when
// nothing did.
std::string DescribeJobChanges(const JobTableSummary& before, const JobTableSummary& after, size_t limit = 3);

}  // namespace elastic::controller
