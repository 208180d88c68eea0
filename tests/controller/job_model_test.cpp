// What elasticd derives from one job's measurements (controller/src/job_model.h): the runtime's
// gradient statistics as efficiency parameters, the best batch per GPU count against the closed
// form of the goodput optimum, which jobs keep their batch, batch changes at a fixed size, when a
// job's model is due for a fit, and the time a job has left.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "job_model.h"

namespace elastic::controller {
namespace {

constexpr double kNow = 1.7e9;

TEST(JobModelTest, EfficiencyFromMetrics) {
  struct Case {
    double sqr, var, b0;
    std::optional<optimizer::EfficiencyParams> want;
  };
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const Case cases[] = {
      // tr(Sigma) = 2.56 per sample: a batch of 128 has gradient variance 0.02.
      {0.01, 2.56, 128, optimizer::EfficiencyParams{128, 0.01, 0.02}},
      // |g|^2 clamped to 0 by the runtime (signal below what it resolves): not a value.
      {0.0, 1.0, 64, std::nullopt},
      {0.5, 0.0, 64, std::nullopt},  // not measured (one rank)
      {-0.1, 1.0, 64, std::nullopt},
      {nan, 1.0, 64, std::nullopt},
      {0.1, inf, 64, std::nullopt},
      {0.1, 1.0, 0, std::nullopt},
  };
  for (const Case& c : cases) {
    auto got = EfficiencyFromMetrics(c.sqr, c.var, c.b0);
    ASSERT_EQ(got.has_value(), c.want.has_value()) << c.sqr << " " << c.var << " " << c.b0;
    if (!got) continue;
    EXPECT_DOUBLE_EQ(got->init_batch, c.want->init_batch);
    EXPECT_DOUBLE_EQ(got->grad_sqr, c.want->grad_sqr);
    EXPECT_DOUBLE_EQ(got->grad_var, c.want->grad_var);
  }
  // The noise scale is tr(Sigma) / |g|^2 whatever B0, and the efficiency is McCandlish's
  // (phi + B0) / (phi + B).
  for (double b0 : {1.0, 64.0, 1000.0}) {
    auto p = EfficiencyFromMetrics(0.01, 2.56, b0);
    ASSERT_TRUE(p);
    EXPECT_NEAR(NoiseScale(*p), 256.0, 1e-9);
    for (double b : {b0, 2 * b0, 10 * b0}) {
      EXPECT_NEAR(optimizer::StatisticalEfficiency(*p, b), (256.0 + b0) / (256.0 + b), 1e-12) << b0 << " " << b;
    }
  }
  EXPECT_TRUE(std::isinf(NoiseScale(optimizer::EfficiencyParams{64, 0.0, 1.0 / 64})));
}

// A job whose step time is T = alpha + beta * local_batch + sync (sync only with more than one
// GPU), measured at 2 and 4 GPUs, with noise scale phi. At n GPUs and global batch B the goodput
// is B / (alpha + sync + beta B / n) * (phi + B0) / (phi + B), largest at
// B* = sqrt((alpha + sync) * phi * n / beta).
ElasticJob MeasuredJob(double phi, bool batch_bounds = true) {
  const double alpha = 0.005, beta = 0.001, sync = 0.04;
  ElasticJob job;
  job.id = 7;
  job.gpu_type = "a100";
  job.base_gpus = 2;
  job.batch = 256;
  job.spec = {{"gpus_min", 2}, {"gpus_max", 8}, {"gpu_step", 1}};
  if (batch_bounds) {
    job.spec["batch_min"] = 64;
    job.spec["batch_max"] = 4096;
  }
  for (int g : {2, 4}) {
    for (double lb : {32.0, 64.0, 128.0}) job.samples.push_back({1, g, lb, alpha + beta * lb + sync});
  }
  const double var = 2.0;  // tr(Sigma)
  job.efficiency = EfficiencyFromMetrics(var / phi, var, 64);
  FitModel(job, kNow);
  return job;
}

double BestBatchClosedForm(double phi, int gpus) { return std::sqrt((0.005 + 0.04) * phi * gpus / 0.001); }

TEST(JobModelTest, BestBatchPerGpuCountMatchesTheClosedForm) {
  for (double phi : {100.0, 400.0, 2000.0}) {
    ElasticJob job = MeasuredJob(phi);
    auto options = JobOptions(job, 8, 8);
    ASSERT_EQ(options.size(), 7u) << phi;
    int64_t previous = 0;
    for (const auto& o : options) {
      const double want = BestBatchClosedForm(phi, o.gpus);
      // 50 geometric candidates over 64..4096 are 9% apart; the fit adds a little.
      EXPECT_NEAR(static_cast<double>(o.batch), want, 0.12 * want) << "phi " << phi << ", " << o.gpus << " GPUs";
      EXPECT_GE(o.batch, previous) << "more GPUs never want a smaller batch";
      previous = o.batch;
    }
    EXPECT_DOUBLE_EQ(options.front().utility, 1.0);
    EXPECT_GT(options.back().utility, options.front().utility);
  }
}

TEST(JobModelTest, JobsKeepTheirBatchWithoutBoundsOrStatistics) {
  ElasticJob fixed = MeasuredJob(400, /*batch_bounds=*/false);
  ElasticJob unmeasured = MeasuredJob(400);
  unmeasured.efficiency.reset();
  ElasticJob one_size = MeasuredJob(400);  // the prior: no model from one size
  std::erase_if(one_size.samples, [](const optimizer::StepSample& s) { return s.gpus != 2; });
  for (const ElasticJob* job : {&fixed, &unmeasured, &one_size}) {
    auto options = JobOptions(*job, 8, 8);
    ASSERT_EQ(options.size(), 7u);
    for (const auto& o : options) EXPECT_EQ(o.batch, 256) << o.gpus << " GPUs";
    EXPECT_GT(options.back().utility, 1.0);
  }
  EXPECT_FALSE(BatchElastic(fixed));
  EXPECT_TRUE(BatchElastic(unmeasured));
}

TEST(JobModelTest, BatchChangesAtTheSameSize) {
  // phi 2000 at 2 GPUs: B* ~ 424. From 64 the gain is large; from 400 it is below 5%.
  ElasticJob job = MeasuredJob(2000);
  const int64_t best = JobOptions(job, 2, 8).front().batch;
  struct Case {
    int64_t current;
    bool frozen, bounds;
    const char* action;
  };
  const Case cases[] = {
      {64, false, true, "batch"}, {64, true, true, "stay"},    {400, false, true, "stay"},
      {best, false, true, "stay"}, {64, false, false, "stay"},
  };
  for (const Case& c : cases) {
    ElasticJob j = MeasuredJob(2000, c.bounds);
    j.batch = c.current;
    nlohmann::json d;
    const bool change = DecideBatchChange(j, 2, best, c.frozen, 8, 0.05, d);
    EXPECT_EQ(d["action"], c.action) << c.current << " " << c.frozen << " " << d.dump();
    EXPECT_EQ(change, std::string(c.action) == "batch");
  }
  ElasticJob j = MeasuredJob(2000);
  j.batch = 64;
  auto gain = BatchGain(j, 2, 8, 64, best);
  ASSERT_TRUE(gain);
  // The closed form of the goodput ratio (step times exact, so the fit reproduces them).
  auto goodput = [](double b) { return b / (0.045 + 0.001 * b / 2) * (2000 + 64) / (2000 + b); };
  EXPECT_NEAR(*gain, goodput(static_cast<double>(best)) / goodput(64), 0.02);
}

TEST(JobModelTest, AFitIsDueAtANewSizeWithTwiceTheSamplesOrWhenStale) {
  ElasticJob job = MeasuredJob(2000);  // fitted at kNow on 6 samples at 2 sizes
  job.metrics_received = 6;
  FitModel(job, kNow);
  const std::vector<optimizer::Option> fitted = JobOptions(job, 8, 8);
  EXPECT_EQ(FitDue(job, kNow), FitNeed::kNone);
  EXPECT_GE(job.refit_at, kNow + 0.75 * kRefitPeriodS);
  EXPECT_LE(job.refit_at, kNow + 1.25 * kRefitPeriodS);
  // Stale, but nothing arrived since the fit: a refit would make the same fit.
  EXPECT_EQ(FitDue(job, job.refit_at + 1), FitNeed::kNone);
  job.metrics_received++;
  EXPECT_EQ(FitDue(job, job.refit_at - 1), FitNeed::kNone);
  EXPECT_EQ(FitDue(job, job.refit_at), FitNeed::kStale);
  // Twice the samples (at the same sizes): due now.
  const size_t n = job.samples.size();
  for (size_t i = 0; i < n; ++i) job.samples.push_back(job.samples[i]);
  EXPECT_EQ(FitDue(job, kNow), FitNeed::kMoreSamples);
  // A new size: the most urgent. Until the fit is made, the options are the last fit's.
  job.samples.push_back({1, 8, 32, 0.005 + 0.032 + 0.04});
  EXPECT_EQ(FitDue(job, kNow), FitNeed::kNewSize);
  const std::vector<optimizer::Option> kept = JobOptions(job, 8, 8);
  ASSERT_EQ(kept.size(), fitted.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(kept[i].batch, fitted[i].batch);
    EXPECT_EQ(kept[i].utility, fitted[i].utility);
  }
  const uint64_t generation = job.fit_generation;
  FitModel(job, kNow + 1);
  EXPECT_EQ(job.fit_generation, generation + 1);
  EXPECT_EQ(job.fit_sizes, 3u);
  EXPECT_EQ(FitDue(job, kNow + 1), FitNeed::kNone);
  // Never fitted: the prior (the current batch at every size) until the first fit.
  ElasticJob fresh = MeasuredJob(2000);
  fresh.fit.reset();
  fresh.fit_generation = 0;
  EXPECT_EQ(FitDue(fresh, kNow), FitNeed::kNewSize);
  for (const auto& o : JobOptions(fresh, 8, 8)) EXPECT_EQ(o.batch, 256) << o.gpus << " GPUs";
  // One size only: no model, nothing to fit.
  std::erase_if(fresh.samples, [](const optimizer::StepSample& s) { return s.gpus != 2; });
  EXPECT_EQ(FitDue(fresh, kNow), FitNeed::kNone);
}

TEST(JobModelTest, PlausibleSamplesBoundSpeedUpsByTheJobsOwnMeasurements) {
  // Honest Pollux step times (T = 0.005 + 0.001 b + 0.04 with more than one GPU) at 1, 2 and 4
  // GPUs and three local batches each: unchanged.
  std::vector<optimizer::StepSample> honest;
  for (int g : {1, 2, 4}) {
    for (double lb : {32.0, 64.0, 128.0}) honest.push_back({1, g, lb, 0.005 + 0.001 * lb + (g > 1 ? 0.04 : 0.0)});
  }
  const std::vector<optimizer::StepSample> same = PlausibleSamples(honest);
  ASSERT_EQ(same.size(), honest.size());
  for (size_t i = 0; i < honest.size(); ++i) EXPECT_EQ(same[i].step_time, honest[i].step_time) << i;

  // 1 GPU at 64 samples: 0.1 s. Claims at 2 GPUs: 0.02 s with 32 samples each (5x the throughput
  // on 2x the GPUs): raised to 0.05 s, linear; 0.08 s with 64 each (faster with more work):
  // raised to 0.1 s. 2 GPUs with 16 each after them: bounded by the raised 0.05 s at 32, 0.025 s.
  // A slow first step at 1 GPU (3 s, compiling) does not raise the bound: the fastest step counts.
  const std::vector<optimizer::StepSample> claimed{
      {1, 1, 64, 3.0}, {1, 1, 64, 0.1}, {1, 2, 32, 0.02}, {1, 2, 64, 0.08}, {1, 4, 16, 0.001}, {1, 4, 16, 0.04}};
  const std::vector<optimizer::StepSample> bounded = PlausibleSamples(claimed);
  const double want[] = {3.0, 0.1, 0.05, 0.1, 0.025, 0.04};
  for (size_t i = 0; i < claimed.size(); ++i) {
    EXPECT_DOUBLE_EQ(bounded[i].step_time, want[i]) << i;
    EXPECT_EQ(bounded[i].gpus, claimed[i].gpus);
    EXPECT_EQ(bounded[i].local_batch, claimed[i].local_batch);
  }
}

// The utility of n GPUs over the base (2 GPUs) for a job without batch bounds (its batch, 256,
// stays), from the option table.
std::map<int, double> Utilities(const ElasticJob& job, int max_gpus, int gpus_per_node) {
  std::map<int, double> u;
  for (const auto& o : JobOptions(job, max_gpus, gpus_per_node)) u[o.gpus] = o.utility;
  return u;
}

TEST(JobModelTest, TheSpeedUpCapLeavesAnHonestJobAlone) {
  // MeasuredJob's step times: T(n, b) = 0.005 + 0.001 b + 0.04 (n > 1). At batch 256 the utility
  // of n GPUs is T(2, 128) / T(n, 256 / n), sub-linear: no bound of the cap is reached.
  const ElasticJob job = MeasuredJob(400, /*batch_bounds=*/false);
  const std::map<int, double> u = Utilities(job, 8, 8);
  ASSERT_EQ(u.size(), 7u);
  for (const auto& [n, got] : u) {
    const double want = (0.045 + 0.128) / (0.045 + 0.001 * std::ceil(256.0 / n));
    EXPECT_NEAR(got, want, 1e-3 * want) << n << " GPUs";
  }
  // Across nodes (2 GPUs a node) as well: the fit's cross-node terms equal its intra-node ones.
  for (const auto& [n, got] : Utilities(job, 8, 2)) {
    EXPECT_NEAR(got, u.at(n), 1e-3 * u.at(n)) << n << " GPUs, 2 a node";
  }
}

TEST(JobModelTest, AFitNeverPromisesMoreThanLinearScaling) {
  // A job at 2 GPUs on one node (2 GPUs a node) whose samples at 2 GPUs on two nodes claim a
  // synchronisation of 5 ms against 40 ms within its node: the fit makes cross-node steps cheap,
  // so 4 GPUs on two nodes would train ~3x what the base does. Capped: at most linear.
  ElasticJob job = MeasuredJob(400, /*batch_bounds=*/false);
  job.batch = 64;
  job.samples.clear();
  for (double lb : {16.0, 32.0, 64.0}) {
    job.samples.push_back({1, 2, lb, 0.005 + 0.001 * lb + 0.04});
    job.samples.push_back({2, 2, lb, 0.005 + 0.001 * lb + 0.005});
  }
  job.samples.push_back({2, 3, 21, 0.005 + 0.021 + 0.005});
  FitModel(job, kNow);
  ASSERT_EQ(PlausibleSamples(job.samples).back().step_time, job.samples.back().step_time) << "not the samples' doing";
  const std::map<int, double> u = Utilities(job, 8, 2);
  ASSERT_EQ(u.size(), 7u);
  for (const auto& [n, got] : u) EXPECT_LE(got, n / 2.0 + 1e-9) << n << " GPUs";
  // The bound itself: no step at 4 GPUs is shorter than the base's with the same share (16).
  EXPECT_NEAR(u.at(4), (0.005 + 0.032 + 0.04) / (0.005 + 0.016 + 0.04), 0.02);
}

TEST(JobModelTest, TimeLeftAtCurrentSize) {
  ElasticJob job;
  job.total_samples = 100000;
  job.samples_done = 40000;
  EXPECT_FALSE(TimeLeftAtCurrentSize(job, kNow)) << "no speed measured";
  job.samples.push_back({1, 2, 128, 0.1});  // 2560 samples/s
  EXPECT_NEAR(*TimeLeftAtCurrentSize(job, kNow), 60000.0 / 2560.0, 1e-9);
  job.metrics_at = kNow - 10;  // trained 10 s since
  EXPECT_NEAR(*TimeLeftAtCurrentSize(job, kNow), 60000.0 / 2560.0 - 10, 1e-9);
  job.metrics_at = kNow - 100;
  EXPECT_EQ(*TimeLeftAtCurrentSize(job, kNow), 0.0);
  job.total_samples = 0;
  EXPECT_FALSE(TimeLeftAtCurrentSize(job, kNow)) << "no training goal";
}

}  // namespace
}  // namespace elastic::controller
