// Fused sweeps (fusion.h): profiles (built-in, parsed, from step times), a sweep's best
// (GPUs, trials per GPU) choices against every spread of its trials, and the dp policy on
// snapshots mixing sweeps and ordinary jobs against brute force over every spread of every sweep.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "elastic/optimizer/fusion.h"
#include "elastic/optimizer/policy.h"

namespace elastic::optimizer {
namespace {

TEST(FusionProfile, BuiltinsAreTheMeasuredFigures) {
  Result<FusionProfile> mlp = BuiltinFusionProfile("cpu-mlp");
  ASSERT_TRUE(mlp.ok());
  EXPECT_TRUE(ValidateFusionProfile(mlp.value()).ok());
  EXPECT_EQ(mlp.value().max_width(), 16);
  EXPECT_DOUBLE_EQ(mlp.value().Speedup(1), 1.0);
  EXPECT_DOUBLE_EQ(mlp.value().Speedup(2), 0.86);
  EXPECT_DOUBLE_EQ(mlp.value().Speedup(3), (0.86 + 1.38) / 2);  // linear between measured widths
  EXPECT_DOUBLE_EQ(mlp.value().Speedup(8), 1.77);
  EXPECT_DOUBLE_EQ(mlp.value().Speedup(16), 2.39);
  EXPECT_DOUBLE_EQ(mlp.value().Speedup(17), 0.0);
  Result<FusionProfile> cnn = BuiltinFusionProfile("cpu-cnn");
  ASSERT_TRUE(cnn.ok());
  EXPECT_DOUBLE_EQ(cnn.value().Speedup(16), 1.39);
  Result<FusionProfile> bad = BuiltinFusionProfile("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "unknown fusion profile 'gpu' (known: cpu-mlp, cpu-cnn)");
}

TEST(FusionProfile, ParsedListsAndTheirErrors) {
  Result<FusionProfile> p = ParseFusionProfile("2:1.9,4:3.5");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p.value().speedup, (std::vector<double>{1.0, 1.9, 2.7, 3.5}));
  EXPECT_TRUE(ParseFusionProfile("1:1,2:2").ok());
  EXPECT_TRUE(ParseFusionProfile("cpu-cnn").ok());
  Result<FusionProfile> e = ParseFusionProfile("2:2.5");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "fusion profile '2:2.5': width 2 has speedup 2.500000; expected a number in (0, 2]");
  e = ParseFusionProfile("4:2,2:1.5");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "fusion profile '4:2,2:1.5': widths must be >= 2 and increasing, got 2 after 4");
  e = ParseFusionProfile("2:x");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(),
            "fusion profile: expected W:SPEEDUP items separated by commas (e.g. 2:1.9,4:3.5,8:6), got '2:x'");
  EXPECT_FALSE(ValidateFusionProfile(FusionProfile{"z", {}}).ok());
  EXPECT_FALSE(ValidateFusionProfile(FusionProfile{"z", {0.9, 1.5}}).ok());
  EXPECT_FALSE(ValidateFusionProfile(FusionProfile{"z", {1.0, -1.0}}).ok());
}

TEST(FusionProfile, FromStepTimesSharesTheFixedCost) {
  // T(b) = 0.01 + 0.001 b: at b = 10, w trials cost 0.01 + 0.01 w instead of 0.02 w.
  auto t = [](double b) { return 0.01 + 0.001 * b; };
  FusionProfile p = ProfileFromStepTimes("lin", t, 10.0, 45.0, 16);
  ASSERT_EQ(p.max_width(), 4);  // 4 x 10 <= 45 < 5 x 10
  for (int w = 1; w <= 4; ++w) EXPECT_NEAR(p.Speedup(w), 0.02 * w / (0.01 + 0.01 * w), 1e-12) << w;
  EXPECT_TRUE(ValidateFusionProfile(p).ok());
  EXPECT_EQ(ProfileFromStepTimes("lin", t, 10.0, 1000.0, 3).max_width(), 3);
}

// Every spread of at most `trials` trials over exactly `gpus` GPUs, 1..W each: the best throughput.
double BestSpread(const FusionProfile& p, int trials, int gpus, int W) {
  double best = -1.0;
  std::function<void(int, int, double)> rec = [&](int g, int left, double v) {
    if (g == gpus) {
      best = std::max(best, v);
      return;
    }
    for (int w = 1; w <= std::min(W, left - (gpus - g - 1)); ++w) rec(g + 1, left - w, v + p.Speedup(w));
  };
  rec(0, trials, 0.0);
  return best;
}

FusionProfile RandomProfile(std::mt19937_64& rng, int width) {
  std::uniform_real_distribution<double> u(0.05, 1.0);
  FusionProfile p{"random", {1.0}};
  for (int w = 2; w <= width; ++w) p.speedup.push_back(u(rng) * w);  // not concave in general
  return p;
}

TEST(SweepChoices, BestOnEveryGpuCountAgainstEverySpread) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 300; ++round) {
    const FusionProfile p = RandomProfile(rng, 1 + static_cast<int>(rng() % 5));
    const int trials = 1 + static_cast<int>(rng() % 8);
    const int max_gpus = 1 + static_cast<int>(rng() % 6);
    const int cap = static_cast<int>(rng() % 4);  // 0: the profile's width
    const int W = cap > 0 ? std::min(cap, p.max_width()) : p.max_width();
    const std::vector<FusedChoice> choices = SweepChoices(p, trials, max_gpus, cap);
    ASSERT_EQ(static_cast<int>(choices.size()), std::min(trials, max_gpus));
    for (const FusedChoice& c : choices) {
      SCOPED_TRACE("round " + std::to_string(round) + ", " + std::to_string(c.gpus) + " GPUs");
      EXPECT_NEAR(c.throughput, BestSpread(p, trials, c.gpus, W), 1e-12);
      ASSERT_EQ(static_cast<int>(c.per_gpu.size()), c.gpus);
      int sum = 0;
      double tp = 0.0;
      for (int w : c.per_gpu) {
        EXPECT_GE(w, 1);
        EXPECT_LE(w, W);
        EXPECT_LE(w, c.width);
        sum += w;
        tp += p.Speedup(w);
      }
      EXPECT_EQ(sum, c.trials);
      EXPECT_LE(c.trials, trials);
      EXPECT_NEAR(tp, c.throughput, 1e-12);
      EXPECT_EQ(FusedChoiceFor(choices, c.gpus), &c);
    }
  }
  EXPECT_TRUE(SweepChoices(RandomProfile(rng, 3), 0, 4).empty());
  EXPECT_EQ(FusedChoiceFor({}, 1), nullptr);
}

TEST(SweepChoices, UnevenSpreadWinsOnANonConcaveProfile) {
  // Two trials fused are worth less than one alone, three more than two GPUs alone.
  const FusionProfile p{"dip", {1.0, 0.86, 2.5}};
  const std::vector<FusedChoice> c = SweepChoices(p, 4, 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].per_gpu, (std::vector<int>{3, 1}));
  EXPECT_DOUBLE_EQ(c[1].throughput, 3.5);
  EXPECT_EQ(c[0].per_gpu, (std::vector<int>{3}));
  const FusionProfile lin{"linear", {1.0, 2.0, 3.0}};
  EXPECT_EQ(SweepChoices(lin, 2, 4).back().trials, 2);  // never more GPUs than trials
  EXPECT_EQ(SweepChoices(lin, 3, 1).front().per_gpu, (std::vector<int>{3}));
}

// The dp policy on sweeps and ordinary jobs vs the best over every option of every job and every
// spread of every sweep.
TEST(SweepChoices, DpPlanIsTheBruteForceOptimum) {
  std::mt19937_64 rng(11);
  auto policy = MakePolicy("dp");
  ASSERT_TRUE(policy.ok());
  for (int round = 0; round < 60; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Snapshot s;
    const int cap = 2 + static_cast<int>(rng() % 6);
    s.cluster.types.push_back({"g", 1, cap});
    struct Sweep {
      FusionProfile profile;
      int trials;
    };
    std::vector<Sweep> sweeps;  // by job index (trials 0: an ordinary job)
    const int jobs = 2 + static_cast<int>(rng() % 3);
    std::uniform_real_distribution<double> u(0.2, 2.0);
    for (int j = 0; j < jobs; ++j) {
      Job job;
      job.id = "j" + std::to_string(j);
      job.max_gpus = cap;
      if (rng() % 2) {
        Sweep sw{RandomProfile(rng, 1 + static_cast<int>(rng() % 4)), 1 + static_cast<int>(rng() % 5)};
        job.max_gpus = std::min(sw.trials, cap);
        job.options = SweepOptions(SweepChoices(sw.profile, sw.trials, cap), "g");
        sweeps.push_back(sw);
      } else {
        for (int g = 1; g <= std::min(cap, 1 + static_cast<int>(rng() % 3)); ++g) job.options.push_back({"g", g, 0, u(rng) * g});
        sweeps.push_back({{}, 0});
      }
      s.jobs.push_back(job);
    }
    double best = 0.0;
    std::function<void(size_t, int, double)> rec = [&](size_t j, int used, double v) {
      if (j == s.jobs.size()) {
        best = std::max(best, v);
        return;
      }
      rec(j + 1, used, v);
      if (sweeps[j].trials == 0) {
        for (const Option& o : s.jobs[j].options) {
          if (used + o.gpus <= cap) rec(j + 1, used + o.gpus, v + o.utility);
        }
        return;
      }
      const Sweep& sw = sweeps[j];
      for (int g = 1; g <= std::min(sw.trials, cap - used); ++g) {
        rec(j + 1, used + g, v + BestSpread(sw.profile, sw.trials, g, sw.profile.max_width()));
      }
    };
    rec(0, 0, 0.0);
    PolicyOptions po;
    po.place = false;
    Result<Plan> plan = policy.value()->Solve(s, po);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_NEAR(plan.value().objective, best, 1e-9);
    EXPECT_TRUE(CheckPlan(s, plan.value()).ok());
  }
}

}  // namespace
}  // namespace elastic::optimizer
