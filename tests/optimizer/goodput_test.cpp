// Goodput models: closed forms, the NLopt fit against known parameters, profile interpolation,
// best batch within bounds, and option tables generated from a model.
#include <gtest/gtest.h>

#include <cmath>

#include "elastic/optimizer/goodput.h"
#include "elastic/optimizer/policy.h"

namespace elastic::optimizer {
namespace {

TEST(Efficiency, ClosedForms) {
  const EfficiencyParams p{128.0, 2.0, 6.0};
  EXPECT_DOUBLE_EQ(StatisticalEfficiency(p, 128.0), 1.0);
  // s = 4: (6 + 2) / (6/4 + 2) / 4 = 8 / 3.5 / 4.
  EXPECT_NEAR(StatisticalEfficiency(p, 512.0), 8.0 / 3.5 / 4.0, 1e-12);
  // No gradient noise: every extra sample is wasted, E = 1/s.
  EXPECT_NEAR(StatisticalEfficiency({100.0, 1.0, 0.0}, 400.0), 0.25, 1e-12);
  // Noise-dominated: E -> 1 as var / sqr grows.
  EXPECT_GT(StatisticalEfficiency({100.0, 1e-6, 1.0}, 400.0), 0.999);
}

TEST(PolluxStepTime, Form) {
  const PolluxParams p{0.1, 0.01, 0.2, 0.02, 0.05, 0.005, 2.0};
  EXPECT_DOUBLE_EQ(PolluxStepTime(p, 1, 1, 10.0, 0), 0.2);  // compute only
  const double tc = 0.2, tr = 0.05 + 0.005 * 2;            // 4 replicas on one node
  EXPECT_NEAR(PolluxStepTime(p, 1, 4, 10.0, 0), std::sqrt(tc * tc + tr * tr), 1e-12);
  const double tn = 0.2 + 0.02 * 6;  // 8 replicas over 2 nodes
  EXPECT_NEAR(PolluxStepTime(p, 2, 8, 10.0, 0), std::sqrt(tc * tc + tn * tn), 1e-12);
  EXPECT_NEAR(PolluxStepTime(p, 2, 8, 10.0, 3), std::sqrt(tc * tc + tn * tn) + 3 * tc, 1e-12);
}

TEST(FitPollux, RecoversKnownParametersFromSyntheticSamples) {
  const PolluxParams truth{0.05, 0.002, 0.12, 0.01, 0.03, 0.004, 2.5};
  std::vector<StepSample> samples;
  for (int gpus : {1, 2, 4, 8, 16, 32}) {
    for (double b : {8.0, 32.0, 64.0, 128.0}) {
      const int nodes = gpus <= 4 ? 1 : gpus / 4;
      samples.push_back({nodes, gpus, b, PolluxStepTime(truth, nodes, gpus, b, 0)});
      if (gpus >= 2 && gpus <= 4) {
        samples.push_back({2, gpus, b, PolluxStepTime(truth, 2, gpus, b, 0)});
      }
    }
  }
  Result<PolluxParams> fit = FitPollux(samples);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit.value().alpha_c, truth.alpha_c, 0.05 * truth.alpha_c);
  EXPECT_NEAR(fit.value().beta_c, truth.beta_c, 0.05 * truth.beta_c);
  for (const StepSample& s : samples) {
    const double pred = PolluxStepTime(fit.value(), s.nodes, s.gpus, s.local_batch, 0);
    EXPECT_NEAR(pred, s.step_time, 0.02 * s.step_time) << s.gpus << " GPUs, b=" << s.local_batch;
  }
  // Held-out placement: 64 GPUs over 16 nodes.
  EXPECT_NEAR(PolluxStepTime(fit.value(), 16, 64, 64.0, 0), PolluxStepTime(truth, 16, 64, 64.0, 0),
              0.05 * PolluxStepTime(truth, 16, 64, 64.0, 0));
}

TEST(FitPollux, OptimisticPriorWithoutMultiGpuData) {
  std::vector<StepSample> samples = {{1, 1, 16.0, 0.1 + 0.01 * 16}, {1, 1, 64.0, 0.1 + 0.01 * 64}};
  Result<PolluxParams> fit = FitPollux(samples);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit.value().alpha_c, 0.1, 1e-3);
  EXPECT_NEAR(fit.value().beta_c, 0.01, 1e-4);
  // Perfect scaling is assumed: no synchronisation cost.
  EXPECT_NEAR(PolluxStepTime(fit.value(), 4, 16, 32.0, 0), PolluxStepTime(fit.value(), 1, 1, 32.0, 0), 1e-9);
}

// Noisy samples of a job at 2 and 4 GPUs on one node: three local batches, `repeats` samples each
// (a job's window of samples repeats its configurations).
std::vector<StepSample> NoisySamples(int repeats, double slower = 1.0) {
  const PolluxParams truth{0.01, 0.001, 0.06, 0.004, 0.03, 0.004, 2.0};
  std::vector<StepSample> samples;
  int k = 0;
  for (int gpus : {2, 4}) {
    for (double b : {32.0, 64.0, 128.0}) {
      for (int r = 0; r < repeats; ++r, ++k) {
        const double noise = 1.0 + 0.03 * std::sin(1.7 * k);  // deterministic, +-3%
        samples.push_back({1, gpus, b, slower * noise * PolluxStepTime(truth, 1, gpus, b, 0)});
      }
    }
  }
  return samples;
}

// The squared log error of step-time samples under a fit.
double SampleLoss(const PolluxParams& p, const std::vector<StepSample>& samples) {
  double l = 0;
  for (const StepSample& s : samples) l += std::pow(std::log(PolluxStepTime(p, s.nodes, s.gpus, s.local_batch, 0) / s.step_time), 2);
  return l;
}

TEST(FitPollux, RepeatedConfigurationsCountByTheirNumber) {
  // Six configurations, the k-th sampled 1 + 3k times, each off the form by up to 15% (no
  // parameters fit them all): the fit minimises the error of the samples, so a configuration
  // sampled often weighs more than one sampled once. A fit of each configuration's geometric mean
  // once (equal weights) minimises something else, and has the larger error on the samples.
  const PolluxParams truth{0.01, 0.001, 0.06, 0.004, 0.03, 0.004, 2.0};
  std::vector<StepSample> window, means;
  int k = 0, c = 0;
  for (int gpus : {2, 4}) {
    for (double b : {32.0, 64.0, 128.0}) {
      const double bias = 1.0 + 0.15 * std::sin(2.3 * c);
      double log_sum = 0;
      const int repeats = 1 + 3 * c;
      for (int r = 0; r < repeats; ++r, ++k) {
        const double t = bias * (1.0 + 0.03 * std::sin(1.7 * k)) * PolluxStepTime(truth, 1, gpus, b, 0);
        window.push_back({1, gpus, b, t});
        log_sum += std::log(t);
      }
      means.push_back({1, gpus, b, std::exp(log_sum / repeats)});
      ++c;
    }
  }
  Result<PolluxParams> fit = FitPollux(window);
  Result<PolluxParams> unweighted = FitPollux(means);
  ASSERT_TRUE(fit.ok() && unweighted.ok());
  EXPECT_LT(SampleLoss(fit.value(), window), 0.9 * SampleLoss(unweighted.value(), window));
  // The order of the samples does not matter.
  Result<PolluxParams> reversed = FitPollux(std::vector<StepSample>(window.rbegin(), window.rend()));
  ASSERT_TRUE(reversed.ok());
  for (const StepSample& s : means) {
    const double a = PolluxStepTime(fit.value(), s.nodes, s.gpus, s.local_batch, 0);
    EXPECT_NEAR(PolluxStepTime(reversed.value(), s.nodes, s.gpus, s.local_batch, 0), a, 1e-4 * a);
  }
}

TEST(FitPollux, AWarmStartFitsAsWellAsTwoColdStarts) {
  // A job fitted on its samples, which then gets more (10% slower, as after a change of node):
  // the refit from the previous fit reaches the cold fit's error and predictions.
  const std::vector<StepSample> before = NoisySamples(2);
  Result<PolluxParams> first = FitPollux(before);
  ASSERT_TRUE(first.ok());
  std::vector<StepSample> after = before;
  for (const StepSample& s : NoisySamples(2, 1.1)) after.push_back(s);
  Result<PolluxParams> cold = FitPollux(after);
  Result<PolluxParams> warm = FitPollux(after, first.value());
  ASSERT_TRUE(cold.ok() && warm.ok());
  EXPECT_LE(SampleLoss(warm.value(), after), SampleLoss(cold.value(), after) * (1 + 1e-3) + 1e-12);
  for (int gpus : {2, 4, 8}) {
    const double c = PolluxStepTime(cold.value(), 1, gpus, 64.0, 0), w = PolluxStepTime(warm.value(), 1, gpus, 64.0, 0);
    EXPECT_NEAR(w, c, 0.01 * c) << gpus << " GPUs";
  }
  // A previous fit outside the bounds of the new samples is clamped into them, not refused.
  PolluxParams wild = first.value();
  wild.alpha_c = 1e9;
  wild.gamma = std::nan("");
  EXPECT_TRUE(FitPollux(after, wild).ok());
}

TEST(FitPollux, RejectsBadSamples) {
  EXPECT_EQ(FitPollux({}).status().message(), "no step-time samples to fit");
  EXPECT_FALSE(FitPollux({{1, 1, 8.0, -1.0}}).ok());
  EXPECT_FALSE(FitPollux({{2, 1, 8.0, 1.0}}).ok());  // more nodes than GPUs
}

TEST(ProfileThroughput, InterpolatesInBatchAndGpuCount) {
  ProfileThroughput m({{"v100", {{1, 1, 10.0, 1.0}, {1, 1, 20.0, 2.0}, {1, 4, 10.0, 1.5}, {1, 4, 20.0, 2.5}}}});
  EXPECT_NEAR(*m.StepTime({"v100", 1, 1}, 15.0, 0), 1.5, 1e-12);
  EXPECT_NEAR(*m.StepTime({"v100", 1, 2}, 10.0, 0), 1.0 + 0.5 / 3.0, 1e-12);
  EXPECT_NEAR(*m.StepTime({"v100", 1, 4}, 20.0, 2), 2.5 + 2 * 2.0, 1e-12);  // accumulation adds compute
  EXPECT_FALSE(m.StepTime({"v100", 2, 8}, 10.0, 0).has_value());  // beyond the measured counts
  EXPECT_FALSE(m.StepTime({"k80", 1, 1}, 10.0, 0).has_value());
}

Job ModelJob(std::shared_ptr<const GoodputModel> model) {
  Job j;
  j.id = "m";
  j.min_gpus = 1;
  j.max_gpus = 16;
  j.min_batch = 64;
  j.max_batch = 4096;
  j.min_local_batch = 8;
  j.max_local_batch = 128;
  j.accumulation = true;
  j.model = std::move(model);
  return j;
}

TEST(GoodputModel, BestBatchStaysWithinBoundsAndUsesAccumulation) {
  auto tp = std::make_shared<PolluxThroughput>(std::map<std::string, PolluxParams>{
      {"a100", {0.02, 0.001, 0.05, 0.005, 0.01, 0.001, 2.0}}});
  auto model = std::make_shared<GoodputModel>(tp, EfficiencyParams{64.0, 1.0, 50.0});
  const Job j = ModelJob(model);
  for (int g : {1, 2, 4, 8, 16}) {
    const std::optional<BatchChoice> c = model->BestBatch(j, {"a100", (g + 3) / 4, g});
    ASSERT_TRUE(c.has_value()) << g;
    EXPECT_GE(c->batch, j.min_batch);
    EXPECT_LE(c->batch, j.max_batch);
    EXPECT_GE(c->local_batch, static_cast<double>(j.min_local_batch));
    EXPECT_LE(c->local_batch, static_cast<double>(j.max_local_batch));
    EXPECT_EQ(c->batch, static_cast<int64_t>(c->local_batch) * g * (c->accum_steps + 1));
    EXPECT_NEAR(c->goodput, c->throughput * c->efficiency, 1e-9 * c->goodput);
  }
  // One GPU with batch 1024 needs accumulation (1024 / 128 = 8 micro-steps).
  const std::optional<BatchChoice> acc = model->Evaluate(j, {"a100", 1, 1}, 1024);
  ASSERT_TRUE(acc.has_value());
  EXPECT_EQ(acc->accum_steps, 7);
  Job no_acc = j;
  no_acc.accumulation = false;
  EXPECT_FALSE(model->Evaluate(no_acc, {"a100", 1, 1}, 1024).has_value());
}

TEST(GoodputModel, GeneratedOptionsAreRelativeToTheBaseAndSolvable) {
  auto tp = std::make_shared<PolluxThroughput>(std::map<std::string, PolluxParams>{
      {"a100", {0.02, 0.001, 0.05, 0.005, 0.01, 0.001, 2.0}},
      {"v100", {0.05, 0.002, 0.05, 0.005, 0.01, 0.001, 2.0}}});
  auto model = std::make_shared<GoodputModel>(tp, EfficiencyParams{64.0, 1.0, 50.0});
  Snapshot s;
  s.cluster.types = {{"a100", 2, 4}, {"v100", 2, 4}};
  s.jobs = {ModelJob(model)};
  s.jobs[0].gpu_step = 1;
  Result<std::vector<Option>> opts = GenerateOptions(s.jobs[0], s.cluster);
  ASSERT_TRUE(opts.ok()) << opts.status().ToString();
  ASSERT_EQ(opts.value().size(), 16U);  // 1..8 GPUs on each type
  EXPECT_NEAR(opts.value().front().utility, 1.0, 1e-12);
  EXPECT_EQ(opts.value().front().gpu_type, "a100");
  for (const Option& o : opts.value()) {
    if (o.gpu_type == "v100" && o.gpus == 1) {
      EXPECT_LT(o.utility, 1.0) << "v100 is slower";
    }
  }
  const Result<Plan> plan = MakePolicy("dp").value()->Solve(s, {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(CheckPlan(s, plan.value()).ToString(), "ok");
  EXPECT_FALSE(plan.value().assignments[0].pending);
}

}  // namespace
}  // namespace elastic::optimizer
