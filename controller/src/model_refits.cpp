#include "model_refits.h"

#include <algorithm>
#include <chrono>
#include <tuple>
#include <vector>

#include "job_model.h"

namespace elastic::controller {
namespace {

struct Due {
  FitNeed need;  // the more urgent first (the enum's order)
  double since;  // when its fit came due: earlier first
  uint32_t id;
  const ElasticJob* job;
};

}  // namespace

nlohmann::json RefitReport::ToJson() const {
  return {{"due", due},   {"fitted", fitted},         {"fitted_new", fitted_new}, {"left_new", left_new},
          {"ms", ms},     {"longest_ms", longest_ms}, {"oldest_wait_s", oldest_wait_s}};
}

double SteadyClockMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

RefitReport RefitModels(const Registry& registry, double budget_ms, double now, const MsClock& clock) {
  RefitReport report;
  const double start = clock();
  std::vector<Due> due;
  for (const auto& [id, job] : registry.jobs) {
    const FitNeed need = FitDue(job, now);
    if (need == FitNeed::kNone) {
      job.fit_wanted_since = 0;
      continue;
    }
    // A stale fit has been due since its refit time; any other since the first epoch that saw it.
    if (job.fit_wanted_since == 0) job.fit_wanted_since = need == FitNeed::kStale ? job.refit_at : now;
    due.push_back({need, job.fit_wanted_since, id, &job});
  }
  std::sort(due.begin(), due.end(), [](const Due& a, const Due& b) {
    return std::tie(a.need, a.since, a.id) < std::tie(b.need, b.since, b.id);
  });
  report.due = static_cast<int>(due.size());
  double t = clock();
  size_t next = 0;
  for (; next < due.size(); ++next) {
    if (report.fitted > 0 && t - start >= budget_ms) break;
    FitModel(*due[next].job, now);
    const double after = clock();
    report.longest_ms = std::max(report.longest_ms, after - t);
    t = after;
    ++report.fitted;
    if (due[next].need == FitNeed::kNewSize) ++report.fitted_new;
  }
  for (; next < due.size(); ++next) {
    if (due[next].need == FitNeed::kNewSize) ++report.left_new;
    report.oldest_wait_s = std::max(report.oldest_wait_s, now - due[next].job->fit_wanted_since);
  }
  report.ms = t - start;
  return report;
}

}  // namespace elastic::controller
