#include "epoch_trigger.h"

#include <algorithm>
#include <map>

#include "elastic/common/extension_link.h"

namespace elastic::controller {

void EpochTrigger::Notify(const std::string& why) { events_.insert(why); }

void EpochTrigger::NotifyAt(double when, const std::string& why) {
  if (timed_at_ == 0 || when < timed_at_) {
    timed_at_ = when;
    timed_why_ = why;
  }
}

bool EpochTrigger::Due(double now, std::string* why) const {
  const double since = now - last_run_;
  const bool timed = timed_at_ != 0 && now >= timed_at_;
  if ((!events_.empty() || timed) && since >= min_gap_s_) {
    if (why != nullptr) {
      why->clear();
      for (const auto& e : events_) *why += (why->empty() ? "" : ", ") + e;
      if (timed) *why += (why->empty() ? "" : ", ") + timed_why_;
    }
    return true;
  }
  if (since >= period_s_) {
    if (why != nullptr) *why = "period";
    return true;
  }
  return false;
}

void EpochTrigger::Ran(double now) {
  last_run_ = now;
  events_.clear();
  if (timed_at_ != 0 && timed_at_ <= now) timed_at_ = 0;
}

double EpochTrigger::SecondsUntilDue(double now) const {
  const double since = now - last_run_;
  double until = period_s_ - since;
  if (!events_.empty()) until = std::min(until, min_gap_s_ - since);
  if (timed_at_ != 0) until = std::min(until, std::max(timed_at_ - now, min_gap_s_ - since));
  return std::max(0.0, until);
}

JobTableSummary SummarizeJobs(const std::vector<JobInfo>& jobs) {
  JobTableSummary out;
  out.reserve(jobs.size());
  for (const auto& j : jobs) {
    // Extensions come and go because of epochs; the runtime's messages (ready, ack, left) report them.
    if (contract::IsExtensionComment(j.admin_comment) || contract::HasExtensionJobName(j.name)) continue;
    JobPhase phase = JobPhase::kEnded;
    switch (j.state) {
      case SlurmJobState::kPending: phase = JobPhase::kPending; break;
      case SlurmJobState::kRunning: phase = JobPhase::kRunning; break;
      case SlurmJobState::kSuspended: phase = JobPhase::kSuspended; break;
      case SlurmJobState::kEnded: phase = j.completing ? JobPhase::kCompleting : JobPhase::kEnded; break;
    }
    out.emplace_back(j.id, phase);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string DescribeJobChanges(const JobTableSummary& before, const JobTableSummary& after, size_t limit) {
  std::map<uint32_t, JobPhase> old(before.begin(), before.end());
  std::vector<std::string> items;
  auto verb = [](JobPhase s) {
    switch (s) {
      case JobPhase::kPending: return "submitted";
      case JobPhase::kRunning: return "started";
      case JobPhase::kSuspended: return "suspended";
      case JobPhase::kCompleting:
      case JobPhase::kEnded: return "ended";
    }
    return "changed";
  };
  for (const auto& [id, state] : after) {
    auto it = old.find(id);
    if (it == old.end()) {
      // A job first seen running or ended was submitted and went on between two looks.
      items.push_back("job " + std::to_string(id) + " " + verb(state));
    } else {
      if (it->second == JobPhase::kCompleting && state == JobPhase::kEnded) {
        items.push_back("job " + std::to_string(id) + " released its nodes");
      } else if (it->second != state) {
        items.push_back("job " + std::to_string(id) + " " + verb(state));
      }
      old.erase(it);
    }
  }
  for (const auto& [id, state] : old) items.push_back("job " + std::to_string(id) + " gone");
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i) out += (out.empty() ? "" : ", ") + items[i];
  if (items.size() > limit) out += " and " + std::to_string(items.size() - limit) + " more";
  return out;
}

}  // namespace elastic::controller
