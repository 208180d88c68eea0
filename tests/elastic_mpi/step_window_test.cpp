// The step time of a metrics report (elastic_mpi/src/step_window.h): each world's first step is
// left out, a rare stall does not count as the size's speed, a report's window starts empty,
// and no step of an old size is mixed into a new one.
#include "step_window.h"

#include <gtest/gtest.h>

namespace elastic::mpi {
namespace {

TEST(StepWindow, LeavesOutTheFirstStepOfTheWorld) {
  StepWindow w;
  EXPECT_FALSE(w.Add(3.0));  // connections made on first use: not the size's speed
  EXPECT_EQ(w.count(), 0u);
  EXPECT_EQ(w.median(), 0.0);
  EXPECT_TRUE(w.Add(0.1));
  EXPECT_TRUE(w.Add(0.3));
  EXPECT_EQ(w.count(), 2u);
  EXPECT_DOUBLE_EQ(w.median(), 0.2);  // an even count: the mean of the middle two
}

TEST(StepWindow, RareStallsAreNotTheSizesSpeed) {
  // As measured here: 6 ranks stepping in 0.046 s, two stalls of 1.03 s and 2.10 s in 35 steps
  // (their mean, 0.13 s, is slower than the job at 2 ranks, 0.128 s).
  StepWindow w;
  w.Add(0.12);
  for (int i = 0; i < 33; ++i) w.Add(0.046);
  w.Add(1.03);
  w.Add(2.10);
  EXPECT_EQ(w.count(), 35u);
  EXPECT_DOUBLE_EQ(w.median(), 0.046);
}

TEST(StepWindow, SteadySlownessIsMeasured) {
  StepWindow w;
  w.Add(0.1);
  for (double t : {0.5, 0.05, 0.5, 0.5, 0.05}) w.Add(t);  // most steps are slow: so is the size
  EXPECT_DOUBLE_EQ(w.median(), 0.5);
}

TEST(StepWindow, AReportStartsAnEmptyWindowOfTheSameWorld) {
  StepWindow w;
  w.Add(3.0);
  w.Add(0.1);
  w.Clear();
  EXPECT_EQ(w.count(), 0u);
  EXPECT_TRUE(w.Add(0.5));  // the world is warm: counted
  EXPECT_DOUBLE_EQ(w.median(), 0.5);
}

TEST(StepWindow, ANewWorldDropsTheOldSizesStepsAndItsOwnFirst) {
  StepWindow w;
  w.Add(3.0);
  w.Add(0.1);
  w.Add(0.1);
  w.NewWorld();
  EXPECT_EQ(w.count(), 0u);
  EXPECT_FALSE(w.Add(2.5));
  EXPECT_TRUE(w.Add(0.05));
  EXPECT_EQ(w.count(), 1u);
  EXPECT_DOUBLE_EQ(w.median(), 0.05);
}

TEST(StepWindow, AVeryLongWindowKeepsItsLatestSteps) {
  StepWindow w;
  w.Add(1.0);
  for (int i = 0; i < 8192; ++i) w.Add(1.0);  // old steps of 1 s
  for (int i = 0; i < 8192; ++i) w.Add(0.001);  // then fast ones
  EXPECT_LE(w.count(), 8192u);
  EXPECT_GT(w.count(), 4096u);
  EXPECT_DOUBLE_EQ(w.median(), 0.001);
}

}  // namespace
}  // namespace elastic::mpi
