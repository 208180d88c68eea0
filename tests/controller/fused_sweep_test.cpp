// Fused sweeps: the task indexes of an array's pending record as Slurm writes them, and a sweep's
// trials from Slurm's job table.
#include "fused_sweep.h"

#include <gtest/gtest.h>

namespace elastic::controller {
namespace {

using Tasks = std::vector<uint32_t>;

TEST(ParseArrayTasks, SlurmsForms) {
  EXPECT_EQ(ParseArrayTasks("1-7"), (Tasks{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(ParseArrayTasks("3"), (Tasks{3}));
  EXPECT_EQ(ParseArrayTasks("0,3,8-12:2"), (Tasks{0, 3, 8, 10, 12}));
  EXPECT_EQ(ParseArrayTasks("1-7%2"), (Tasks{1, 2, 3, 4, 5, 6, 7}));  // a throttle
  EXPECT_EQ(ParseArrayTasks("5-6,9%1"), (Tasks{5, 6, 9}));
}

TEST(ParseArrayTasks, RefusesWhatSlurmNeverWrites) {
  for (const char* bad : {"", "%2", "7-1", "a", "1-", "-3", "1,,2", "1,", "1-7:0", "1-7:x", "1 - 7", "4294967296",
                          "0-4294967295"}) {
    EXPECT_EQ(ParseArrayTasks(bad), std::nullopt) << bad;
  }
}

JobInfo Task(uint32_t array, int64_t task, SlurmJobState state, std::string pending = "") {
  JobInfo j;
  j.id = array + static_cast<uint32_t>(task + 1);
  j.array_job_id = array;
  j.array_task_id = task;
  j.array_tasks_pending = std::move(pending);
  j.state = state;
  return j;
}

TEST(SweepTrials, RunningAndPendingTasksOfThatArrayOnly) {
  std::vector<JobInfo> jobs{
      Task(100, 0, SlurmJobState::kRunning),  Task(100, 1, SlurmJobState::kEnded),
      Task(100, 2, SlurmJobState::kPending),  Task(100, -1, SlurmJobState::kPending, "4-7"),
      Task(200, 3, SlurmJobState::kRunning),  Task(100, 3, SlurmJobState::kRunning),
  };
  jobs.push_back(JobInfo{});  // no array task at all
  EXPECT_EQ(SweepTrials(jobs, 100), (Tasks{0, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(SweepTrials(jobs, 200), (Tasks{3}));
  EXPECT_EQ(SweepTrials(jobs, 300), Tasks{});
}

}  // namespace
}  // namespace elastic::controller
