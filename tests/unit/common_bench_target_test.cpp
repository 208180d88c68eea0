// Benchmark targets (common/include/elastic/common/bench_target.h): each bound, a figure not
// measured, the tightening factor and its refusal below 1, the line naming the misses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "elastic/common/bench_target.h"

namespace elastic::bench {
namespace {

TEST(BenchTarget, EachBound) {
  EXPECT_TRUE(Check("t", 999, Bound::kBelow, 1000, 1).met);
  EXPECT_FALSE(Check("t", 1000, Bound::kBelow, 1000, 1).met);
  EXPECT_TRUE(Check("t", 1000, Bound::kAtMost, 1000, 1).met);
  EXPECT_FALSE(Check("t", 1000.5, Bound::kAtMost, 1000, 1).met);
  EXPECT_TRUE(Check("r", 10, Bound::kAtLeast, 10, 1).met);
  EXPECT_FALSE(Check("r", 9.99, Bound::kAtLeast, 10, 1).met);
  EXPECT_FALSE(Check("r", 10, Bound::kAbove, 10, 1).met);
  EXPECT_TRUE(Check("r", 10.01, Bound::kAbove, 10, 1).met);
}

TEST(BenchTarget, NotMeasuredMisses) {
  const TargetCheck c = Check("ratio", std::nan(""), Bound::kAtMost, 1.2, 1);
  EXPECT_FALSE(c.met);
  EXPECT_TRUE(ToJson(c)["measured"].is_null());
  EXPECT_EQ(Missed({c}), "ratio not measured (target <= 1.2)");
}

TEST(BenchTarget, TighteningOnlyMakesTargetsHarder) {
  const TargetCheck upper = Check("ms", 400, Bound::kBelow, 1000, 4);
  EXPECT_DOUBLE_EQ(upper.limit, 250);
  EXPECT_DOUBLE_EQ(upper.stated, 1000);
  EXPECT_FALSE(upper.met);
  const TargetCheck lower = Check("ratio", 12.7, Bound::kAtLeast, 10, 2);
  EXPECT_DOUBLE_EQ(lower.limit, 20);
  EXPECT_FALSE(lower.met);
  EXPECT_TRUE(Check("gap", 0, Bound::kAtMost, 0, 1e9).met);  // exact stays reachable
}

TEST(BenchTarget, FactorFromTheEnvironment) {
  ::unsetenv(kTightenVariable);
  EXPECT_EQ(TightenFactor().value(), 1.0);
  ::setenv(kTightenVariable, "1e9", 1);
  EXPECT_EQ(TightenFactor().value(), 1e9);
  for (const char* bad : {"0.5", "0", "-2", "fast", "2x", "inf", "nan"}) {
    ::setenv(kTightenVariable, bad, 1);
    const Result<double> f = TightenFactor();
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_NE(f.status().message().find("ELASTIC_BENCH_TIGHTEN='" + std::string(bad) + "' is not a number >= 1"),
              std::string::npos)
        << f.status().message();
  }
  ::unsetenv(kTightenVariable);
}

TEST(BenchTarget, JsonLineAndMissedLine) {
  const std::vector<TargetCheck> checks{Check("total_ms_max", 1234.5, Bound::kBelow, 1000, 1),
                                        Check("total_ms", 500, Bound::kBelow, 1000, 1)};
  nlohmann::json line{{"bench", "x"}};
  AddChecks(line, checks, 1);
  EXPECT_FALSE(line["met"].get<bool>());
  ASSERT_EQ(line["targets"].size(), 2u);
  EXPECT_EQ(line["targets"][0]["bound"], "<");
  EXPECT_FALSE(line.contains("tighten"));
  EXPECT_EQ(Missed(checks), "total_ms_max 1234.5 (target < 1000)");
  AddChecks(line, {checks[1]}, 2);
  EXPECT_TRUE(line["met"].get<bool>());
  EXPECT_EQ(line["tighten"], 2.0);
  EXPECT_EQ(Missed({checks[1]}), "");
}

}  // namespace
}  // namespace elastic::bench
