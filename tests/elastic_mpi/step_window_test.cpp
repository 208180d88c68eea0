// The step time of a metrics report and when it is due (elastic_mpi/src/step_window.h): each
// world's first step is left out and opens the window, a rare stall does not count as the
// size's speed, a report's window starts empty, and no step of an old size is mixed into a new one.
#include "step_window.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <limits>

namespace elastic::mpi {
namespace {

using Clock = StepWindow::Clock;
const Clock::time_point t0{};
Clock::time_point At(double s) { return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

// A window whose world took its first (uncounted) step of `first` seconds at 0 s, then the
// counted steps `steps`, at 1 s.
StepWindow Opened(double first, std::initializer_list<double> steps = {}) {
  StepWindow w;
  w.Step(first, At(0));
  for (double t : steps) w.Step(t, At(1));
  return w;
}

TEST(StepWindow, LeavesOutTheFirstStepOfTheWorld) {
  StepWindow w;
  w.Step(3.0, At(3));  // connections made on first use: not the size's speed
  EXPECT_EQ(w.count(), 0u);
  EXPECT_EQ(w.median(), 0.0);
  w.Step(0.1, At(3.1));
  w.Step(0.3, At(3.4));
  EXPECT_EQ(w.count(), 2u);
  EXPECT_DOUBLE_EQ(w.median(), 0.2);  // an even count: the mean of the middle two
}

TEST(StepWindow, AWorldsFirstReportCoversTheIntervalAfterItsFirstStep) {
  StepWindow w;
  EXPECT_FALSE(w.Due(At(100), 5));  // no step yet
  w.Step(3.0, At(100));
  EXPECT_FALSE(w.Due(At(100), 5));
  w.Step(0.1, At(104.9));
  EXPECT_FALSE(w.Due(At(104.9), 5));
  w.Step(0.1, At(105));
  EXPECT_TRUE(w.Due(At(105), 5));
  w.Reported(At(105));
  EXPECT_EQ(w.count(), 0u);
  EXPECT_FALSE(w.Due(At(109), 5));
  w.Step(0.1, At(110));
  EXPECT_TRUE(w.Due(At(110), 5));
  // A new world: nothing is due until the interval passed after its own first step.
  w.NewWorld();
  EXPECT_FALSE(w.Due(At(200), 5));
  w.Step(2.5, At(200));
  EXPECT_EQ(w.count(), 0u);
  EXPECT_FALSE(w.Due(At(204), 5));
  w.Step(0.05, At(205));
  EXPECT_TRUE(w.Due(At(205), 5));
  EXPECT_DOUBLE_EQ(w.median(), 0.05);
}

TEST(StepWindow, RareStallsAreNotTheSizesSpeed) {
  // As measured here: 6 ranks stepping in 0.046 s, two stalls of 1.03 s and 2.10 s in 35 steps
  // (their mean, 0.13 s, is slower than the job at 2 ranks, 0.128 s).
  StepWindow w = Opened(0.12);
  for (int i = 0; i < 33; ++i) w.Step(0.046, At(1));
  w.Step(1.03, At(2));
  w.Step(2.10, At(4));
  EXPECT_EQ(w.count(), 35u);
  EXPECT_DOUBLE_EQ(w.median(), 0.046);
}

TEST(StepWindow, SteadySlownessIsMeasured) {
  StepWindow w = Opened(0.1, {0.5, 0.05, 0.5, 0.5, 0.05});  // most steps are slow: so is the size
  EXPECT_DOUBLE_EQ(w.median(), 0.5);
}

TEST(StepWindow, ValuesThatAreNoTimeAreNotCounted) {
  // A program that does not time its steps: its reports carry progress alone.
  StepWindow w = Opened(1.0, {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()});
  EXPECT_EQ(w.count(), 0u);
  EXPECT_TRUE(w.Due(At(5), 5));  // the world is warm all the same
  w.Step(0.2, At(6));
  EXPECT_EQ(w.count(), 1u);
  EXPECT_DOUBLE_EQ(w.median(), 0.2);
}

TEST(StepWindow, ANewWorldDropsTheOldSizesSteps) {
  StepWindow w = Opened(3.0, {0.1, 0.1});
  w.NewWorld();
  EXPECT_EQ(w.count(), 0u);
  w.Step(2.5, At(3));
  w.Step(0.05, At(4));
  EXPECT_EQ(w.count(), 1u);
  EXPECT_DOUBLE_EQ(w.median(), 0.05);
}

TEST(StepWindow, AVeryLongWindowKeepsItsLatestSteps) {
  StepWindow w = Opened(1.0);
  for (int i = 0; i < 8192; ++i) w.Step(1.0, At(1));  // old steps of 1 s
  for (int i = 0; i < 8192; ++i) w.Step(0.001, At(2));  // then fast ones
  EXPECT_LE(w.count(), 8192u);
  EXPECT_GT(w.count(), 4096u);
  EXPECT_DOUBLE_EQ(w.median(), 0.001);
}

}  // namespace
}  // namespace elastic::mpi
