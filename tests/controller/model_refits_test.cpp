// Which jobs' step-time models an epoch fits (controller/src/model_refits.h): never more than the
// budget allows (with a cost per fit injected through the clock, and on the real clock), jobs
// measured at a new size first, every due job within a bounded number of epochs even when more
// fits come due than the budget allows, and refit times spread out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "job_model.h"
#include "model_refits.h"

namespace elastic::controller {
namespace {

constexpr double kNow = 1.7e9;
constexpr double kEpochS = 60;

// A job measured at 1 and 2 GPUs (T = a + b * local batch, +10 ms at 2 GPUs), never fitted.
ElasticJob MeasuredJob(uint32_t id) {
  ElasticJob job;
  job.id = id;
  job.gpu_type = "a100";
  job.base_gpus = 1;
  job.batch = 64;
  job.spec = {{"gpus_min", 1}, {"gpus_max", 4}, {"gpu_step", 1}};
  job.metrics_received = 10;
  const double a = 0.05 + 0.001 * (id % 7), b = 0.001;
  for (int g : {1, 2}) {
    for (double lb : {32.0, 64.0}) job.samples.push_back({1, g, lb, a + b * lb + 0.01 * (g - 1)});
  }
  return job;
}

Registry ManyJobs(int n) {
  Registry r;
  for (int i = 0; i < n; ++i) r.jobs[static_cast<uint32_t>(100 + i)] = MeasuredJob(static_cast<uint32_t>(100 + i));
  return r;
}

uint64_t FitsMade(const Registry& r) {
  uint64_t n = 0;
  for (const auto& [id, job] : r.jobs) n += job.fit_generation;
  return n;
}

// A clock on which every fit costs `ms_per_fit` and nothing else costs anything.
MsClock CostPerFit(const Registry& r, double ms_per_fit) {
  return [&r, ms_per_fit] { return ms_per_fit * static_cast<double>(FitsMade(r)); };
}

TEST(ModelRefitsTest, TheBudgetBoundsTheFitsOfAnEpoch) {
  Registry r = ManyJobs(200);
  const RefitReport rep = RefitModels(r, /*budget_ms=*/100, kNow, CostPerFit(r, 10));
  EXPECT_EQ(rep.due, 200);
  EXPECT_EQ(rep.fitted, 10) << "10 ms a fit, 100 ms of budget";
  EXPECT_EQ(FitsMade(r), 10u);
  EXPECT_EQ(rep.fitted_new, 10);
  EXPECT_EQ(rep.left_new, 190);
  EXPECT_DOUBLE_EQ(rep.ms, 100);
  // The jobs not fitted have no model: their options are the prior's, as before any fit.
  int with_model = 0;
  for (const auto& [id, job] : r.jobs) with_model += job.fit.has_value();
  EXPECT_EQ(with_model, 10);
  // A budget below one fit still fits one job per epoch: the queue always moves.
  const RefitReport one = RefitModels(r, /*budget_ms=*/1, kNow + kEpochS, CostPerFit(r, 10));
  EXPECT_EQ(one.fitted, 1);
}

TEST(ModelRefitsTest, TheBudgetHoldsOnTheRealClock) {
  // Real fits (milliseconds each): the stage stops starting fits once the budget is spent, so it
  // ends within one fit of the budget, however loaded the machine.
  Registry r = ManyJobs(300);
  const RefitReport rep = RefitModels(r, /*budget_ms=*/20, kNow);
  EXPECT_GE(rep.fitted, 1);
  EXPECT_LT(rep.fitted, 300) << "300 fits do not fit in 20 ms";
  EXPECT_LT(rep.ms, 20 + rep.longest_ms) << rep.ToJson().dump();
  EXPECT_EQ(FitsMade(r), static_cast<uint64_t>(rep.fitted));
}

TEST(ModelRefitsTest, EveryDueJobIsFittedWithinBoundedEpochs) {
  // 200 jobs due at once, 10 fits an epoch: all fitted in 20 epochs, each once, in the order they
  // came due (ties: by job id).
  Registry r = ManyJobs(200);
  std::map<uint32_t, int> fitted_in;
  int epoch = 0;
  while (fitted_in.size() < r.jobs.size() && epoch < 100) {
    RefitModels(r, 100, kNow + kEpochS * epoch, CostPerFit(r, 10));
    ++epoch;
    for (const auto& [id, job] : r.jobs) {
      if (job.fit_generation > 0 && !fitted_in.count(id)) fitted_in[id] = epoch;
    }
  }
  EXPECT_EQ(epoch, 20);
  for (const auto& [id, job] : r.jobs) {
    EXPECT_EQ(job.fit_generation, 1u) << "job " << id << ": no refit before every job had its first fit";
    EXPECT_EQ(fitted_in[id], 1 + static_cast<int>(id - 100) / 10) << "job " << id;
  }
}

TEST(ModelRefitsTest, UnderSustainedLoadEveryJobIsRefittedInTurn) {
  // 100 jobs that report metrics every epoch: a fit goes stale after 225-375 s (four to six
  // epochs), so about twice as many fits come due as 10 an epoch can make. The queue serves them
  // in turn: no job waits more than 100 / 10 epochs from the epoch its fit came due (at most the
  // 99 others are due before it, each once), and every job is refitted again and again.
  Registry r = ManyJobs(100);
  std::map<uint32_t, int> due_since;  // the epoch a job's pending fit came due
  int longest_wait = 0;
  for (int epoch = 1; epoch <= 60; ++epoch) {
    const double now = kNow + kEpochS * epoch;
    for (auto& [id, job] : r.jobs) {
      ++job.metrics_received;
      if (FitDue(job, now) != FitNeed::kNone && !due_since.count(id)) due_since[id] = epoch;
    }
    std::map<uint32_t, uint64_t> before;
    for (const auto& [id, job] : r.jobs) before[id] = job.fit_generation;
    const RefitReport rep = RefitModels(r, 100, now, CostPerFit(r, 10));
    EXPECT_EQ(rep.fitted, 10) << "epoch " << epoch;
    for (const auto& [id, job] : r.jobs) {
      if (job.fit_generation == before[id]) continue;
      longest_wait = std::max(longest_wait, epoch - due_since.at(id) + 1);
      due_since.erase(id);
    }
  }
  EXPECT_LE(longest_wait, 10);
  for (const auto& [id, job] : r.jobs) EXPECT_GE(job.fit_generation, 5u) << "job " << id;
}

TEST(ModelRefitsTest, AJobMeasuredAtANewSizeIsFittedFirst) {
  // 100 jobs fitted long ago with metrics since (stale, due for most of an hour), and two that
  // matter for the plan now: one measured at a third size since its fit, one never fitted. With
  // room for 3 fits, both go first, however long the stale ones have waited.
  Registry r = ManyJobs(100);
  RefitModels(r, 1e9, kNow - 3600);  // everyone fitted an hour ago
  for (auto& [id, job] : r.jobs) ++job.metrics_received;
  ElasticJob& grown = r.jobs.at(150);
  grown.samples.push_back({1, 4, 16, 0.05 + 0.016 + 0.03});
  r.jobs[999] = MeasuredJob(999);
  EXPECT_EQ(FitDue(grown, kNow), FitNeed::kNewSize);
  EXPECT_EQ(FitDue(r.jobs.at(101), kNow), FitNeed::kStale);
  std::map<uint32_t, uint64_t> before;
  std::map<uint32_t, double> stale_since;
  for (const auto& [id, job] : r.jobs) {
    before[id] = job.fit_generation;
    if (id != 150 && id != 999) stale_since[id] = job.refit_at;
  }
  const RefitReport rep = RefitModels(r, 30, kNow, CostPerFit(r, 10));
  EXPECT_EQ(rep.due, 101);
  EXPECT_EQ(rep.fitted, 3);
  EXPECT_EQ(rep.fitted_new, 2);
  EXPECT_EQ(r.jobs.at(150).fit_generation, before[150] + 1);
  EXPECT_EQ(r.jobs.at(999).fit_generation, 1u);
  EXPECT_EQ(r.jobs.at(150).fit_sizes, 3u);
  // The stale jobs left keep their last fit meanwhile.
  for (const auto& [id, job] : r.jobs) EXPECT_TRUE(job.fit.has_value()) << id;
  // The third fit is the stale job whose fit went stale first (refit times are jittered).
  uint32_t oldest = 0;
  for (const auto& [id, at] : stale_since) {
    if (oldest == 0 || at < stale_since.at(oldest)) oldest = id;
  }
  for (const auto& [id, job] : r.jobs) {
    if (id != 150 && id != 999) {
      EXPECT_EQ(job.fit_generation, before[id] + (id == oldest ? 1 : 0)) << id;
    }
  }
}

TEST(ModelRefitsTest, FitsMadeTogetherGoStaleAtSpreadTimes) {
  // 300 jobs fitted in one epoch: their fits go stale over 225-375 s, not in one later epoch.
  Registry r = ManyJobs(300);
  RefitModels(r, 1e9, kNow);
  std::vector<double> stale_at;
  for (const auto& [id, job] : r.jobs) {
    EXPECT_GE(job.refit_at, kNow + 0.75 * kRefitPeriodS);
    EXPECT_LE(job.refit_at, kNow + 1.25 * kRefitPeriodS);
    stale_at.push_back(job.refit_at);
  }
  std::sort(stale_at.begin(), stale_at.end());
  EXPECT_GT(stale_at.back() - stale_at.front(), 0.9 * 0.5 * kRefitPeriodS);
  // No epoch-long window sees more than half of them go stale (uniform: 40%).
  for (size_t i = 0, j = 0; i < stale_at.size(); ++i) {
    while (j < stale_at.size() && stale_at[j] < stale_at[i] + kEpochS) ++j;
    EXPECT_LE(j - i, stale_at.size() / 2) << "from " << stale_at[i] - kNow << " s";
  }
}

TEST(ModelRefitsTest, NothingIsRefittedWithoutNewMetrics) {
  Registry r = ManyJobs(5);
  RefitModels(r, 1e9, kNow);
  EXPECT_EQ(FitsMade(r), 5u);
  // Long past their refit time, but no metrics since their fit: a refit would repeat it.
  RefitReport rep = RefitModels(r, 1e9, kNow + 10 * kRefitPeriodS);
  EXPECT_EQ(rep.due, 0);
  EXPECT_EQ(FitsMade(r), 5u);
  r.jobs.begin()->second.metrics_received++;
  rep = RefitModels(r, 1e9, kNow + 10 * kRefitPeriodS);
  EXPECT_EQ(rep.due, 1);
  EXPECT_EQ(rep.fitted, 1);
}

TEST(ModelRefitsTest, AFitSavedWithItsJobNeedsNoRefitAfterARestart) {
  // elasticd restarts: its jobs come back from the state database (ElasticJob::FromJson of what
  // SaveJob wrote). Their fits come back with them: nothing is due, and the option tables are the
  // fitted ones, not the prior's.
  Registry before = ManyJobs(50);
  RefitModels(before, 1e9, kNow);
  Registry after;
  for (const auto& [id, job] : before.jobs) after.jobs[id] = ElasticJob::FromJson(job.ToJson());
  for (const auto& [id, job] : after.jobs) {
    const ElasticJob& old = before.jobs.at(id);
    ASSERT_TRUE(job.fit.has_value()) << "job " << id;
    EXPECT_EQ(job.fit->alpha_c, old.fit->alpha_c);
    EXPECT_EQ(job.fit->beta_n, old.fit->beta_n);
    EXPECT_EQ(job.fit->gamma, old.fit->gamma);
    EXPECT_EQ(job.refit_at, old.refit_at);
    EXPECT_EQ(FitDue(job, kNow + kEpochS), FitNeed::kNone) << "job " << id;
    const auto restored = JobOptions(job, 4, 4), fitted = JobOptions(old, 4, 4);
    ASSERT_EQ(restored.size(), fitted.size());
    for (size_t i = 0; i < fitted.size(); ++i) EXPECT_DOUBLE_EQ(restored[i].utility, fitted[i].utility);
  }
  EXPECT_EQ(RefitModels(after, 1e9, kNow + kEpochS).due, 0);
  // Without the saved fit (a record written before its first fit) the job is due at once.
  nlohmann::json bare = before.jobs.begin()->second.ToJson();
  bare.erase("fit");
  EXPECT_EQ(FitDue(ElasticJob::FromJson(bare), kNow + kEpochS), FitNeed::kNewSize);
}

}  // namespace
}  // namespace elastic::controller
