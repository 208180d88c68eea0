// Unit test of the per-trial split of a fused sweep's GPU-hours (report/src/sweeps.cpp) on
// hand-computed figures.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "elastic/report/journal.h"
#include "elastic/report/report.h"
#include "elastic/report/sweeps.h"

namespace elastic::report {
namespace {

// A fused sweep of array 40 (tasks 40_0 .. 40_3) led by job 41 (task 0), which held 2 GPU-hours
// with its extension: task 2 ran 0.1 GPU-hours before the leader registered; task 3 was never
// reported (it ran on its own afterwards, 0.5 GPU-hours).
TEST(Sweeps, LeaderSplitByTrialStepsAndTasksKeepTheirOwn) {
  auto usage = [](uint64_t id, std::string job_id, double base_h, double ext_h) {
    JobUsage u;
    u.id = id;
    u.job_id = std::move(job_id);
    u.base_gpu_s = base_h * 3600;
    u.extension_gpu_s = ext_h * 3600;
    u.account = "physics";
    u.user = "alice";
    return u;
  };
  std::vector<JobUsage> jobs{usage(41, "40_0", 1.5, 0.5), usage(43, "40_2", 0.1, 0), usage(44, "40_3", 0.5, 0),
                             usage(99, "98_0", 7, 0)};
  Journal journal;
  journal.trials = {{40, 0, 41, 100, "finished", "/r/0.json"},
                    {40, 1, 41, 300, "stopped", "/r/1.json"},
                    {40, 2, 41, 0, "diverged", ""}};
  auto sweeps = SplitSweeps(jobs, journal);
  ASSERT_EQ(sweeps.size(), 1u);
  const SweepUsage& s = sweeps[0];
  EXPECT_EQ(s.leader, 41u);
  EXPECT_EQ(s.account, "physics");
  EXPECT_DOUBLE_EQ(s.leader_gpu_s, 2.0 * 3600);
  EXPECT_DOUBLE_EQ(s.array_gpu_s, 2.6 * 3600);
  ASSERT_EQ(s.trials.size(), 4u);
  EXPECT_EQ(s.trials[0].job_id, "40_0");
  EXPECT_DOUBLE_EQ(s.trials[0].GpuHours(), 0.5);   // 100 of 400 trial-steps of 2 GPU-hours
  EXPECT_DOUBLE_EQ(s.trials[1].GpuHours(), 1.5);   // 300 of 400
  EXPECT_DOUBLE_EQ(s.trials[2].GpuHours(), 0.1);   // its own run, no steps
  EXPECT_DOUBLE_EQ(s.trials[3].GpuHours(), 0.5);   // not reported: its own run only
  EXPECT_EQ(s.trials[3].state, "");
  double sum = 0;
  for (const auto& t : s.trials) sum += t.GpuHours();
  EXPECT_NEAR(sum * 3600, s.array_gpu_s, 1e-6);
  // No steps reported at all: equal shares of the leader among the reported trials.
  for (auto& t : journal.trials) t.steps = 0;
  auto equal = SplitSweeps(jobs, journal);
  EXPECT_DOUBLE_EQ(equal[0].trials[0].fused_gpu_s, 2.0 * 3600 / 3);
  EXPECT_DOUBLE_EQ(equal[0].trials[3].fused_gpu_s, 0.0);
  // A leader outside the report: no sweep.
  jobs.erase(jobs.begin());
  EXPECT_TRUE(SplitSweeps(jobs, journal).empty());
}

}  // namespace
}  // namespace elastic::report
