// Event epochs: what makes the next epoch run before scheduler.epoch has passed. The handlers
// report the runtime's events (NotifyEvent); Watch looks at Slurm's job table for submissions,
// starts and ends; the timer in elasticd_main.cpp asks EpochDue.
#include <algorithm>

#include "controller.h"
#include "elastic/common/log.h"

namespace elastic::controller {
namespace {
constexpr const char* kComponent = "controller";
}  // namespace

void Controller::NotifyEvent(const std::string& what) {
  if (!config_.event_epochs) return;
  trigger_.Notify(what);
  Log(LogLevel::kDebug, kComponent, "event: ", what);
}

void Controller::Watch() {
  if (!config_.event_epochs) return;
  const double now = Now();
  if (now - last_watch_ < config_.watch_interval_s) return;
  last_watch_ = now;
  auto table = slurm_->LoadJobsIfChanged(&jobs_since_);
  if (!table.ok()) {
    Log(LogLevel::kDebug, kComponent, "watch: ", table.status().message());  // the epoch reports Slurm's errors
    return;
  }
  if (!table.value()) return;  // unchanged since the last look
  JobTableSummary now_seen = SummarizeJobs(*table.value());
  std::string changes = DescribeJobChanges(seen_jobs_, now_seen);
  seen_jobs_ = std::move(now_seen);
  if (!changes.empty()) NotifyEvent(changes);
}

bool Controller::EpochDue(std::string* why) const { return trigger_.Due(Now(), why); }

double Controller::SecondsUntilNextCheck() const {
  const double now = Now();
  double until = trigger_.SecondsUntilDue(now);
  if (config_.event_epochs) {
    // Events from the runtime channel arrive any time: look again soon; Slurm's table on its interval.
    until = std::min({until, 0.25, std::max(0.0, last_watch_ + config_.watch_interval_s - now)});
  }
  return until;
}

}  // namespace elastic::controller
