// When epochs run: the period, events coalesced under the minimum gap, and the job-table summary
// that tells submissions, starts and ends from changes no epoch reacts to.
#include "epoch_trigger.h"

#include <gtest/gtest.h>

namespace elastic::controller {
namespace {

TEST(EpochTrigger, FirstCallIsDueThenThePeriod) {
  EpochTrigger t(60, 2);
  std::string why;
  EXPECT_TRUE(t.Due(1000, &why));
  EXPECT_EQ(why, "period");
  t.Ran(1000);
  EXPECT_FALSE(t.Due(1059.9, &why));
  EXPECT_DOUBLE_EQ(t.SecondsUntilDue(1030), 30);
  EXPECT_TRUE(t.Due(1060, &why));
  EXPECT_EQ(why, "period");
}

TEST(EpochTrigger, EventsRunAnEpochAfterTheGapAndAreCoalesced) {
  EpochTrigger t(60, 2);
  t.Ran(1000);
  t.Notify("job 7 submitted");
  t.Notify("job 8 ended");
  t.Notify("job 7 submitted");
  std::string why;
  EXPECT_FALSE(t.Due(1001, &why)) << "within the minimum gap of the last epoch";
  EXPECT_DOUBLE_EQ(t.SecondsUntilDue(1001), 1);
  ASSERT_TRUE(t.Due(1002, &why));
  EXPECT_EQ(why, "job 7 submitted, job 8 ended");
  t.Ran(1002);
  EXPECT_FALSE(t.pending());
  EXPECT_FALSE(t.Due(1003, &why)) << "consumed by the epoch";
  EXPECT_DOUBLE_EQ(t.SecondsUntilDue(1003), 59);
}

TEST(EpochTrigger, AnEventLongAfterTheLastEpochRunsAtOnce) {
  EpochTrigger t(60, 2);
  t.Ran(1000);
  t.Notify("job 3 finished a grow");
  EXPECT_DOUBLE_EQ(t.SecondsUntilDue(1030), 0);
  EXPECT_TRUE(t.Due(1030, nullptr));
  t.SetTimes(60, 45);  // a reload may lengthen the gap
  EXPECT_FALSE(t.Due(1030, nullptr));
}

TEST(EpochTrigger, ATimedEventRunsAnEpochAtItsTime) {
  EpochTrigger t(60, 2);
  t.Ran(1000);
  t.NotifyAt(1010, "job 4 may rescale again");
  t.NotifyAt(1020, "job 5 may rescale again");  // later: the earliest is kept
  std::string why;
  EXPECT_FALSE(t.Due(1009, &why));
  EXPECT_DOUBLE_EQ(t.SecondsUntilDue(1005), 5);
  ASSERT_TRUE(t.Due(1010, &why));
  EXPECT_EQ(why, "job 4 may rescale again");
  t.Ran(1010);
  EXPECT_FALSE(t.Due(1011, &why)) << "consumed";
  t.NotifyAt(1030, "job 6 may rescale again");
  t.Ran(1020);  // an epoch before its time keeps it
  EXPECT_TRUE(t.Due(1030, &why));
}

JobInfo Job(uint32_t id, SlurmJobState s, const std::string& name = "train", const std::string& comment = "") {
  JobInfo j;
  j.id = id;
  j.state = s;
  j.name = name;
  j.admin_comment = comment;
  return j;
}

TEST(JobTableSummary, ReportsSubmissionsStartsAndEndsOnly) {
  auto before = SummarizeJobs({Job(1, SlurmJobState::kRunning), Job(2, SlurmJobState::kPending),
                               Job(3, SlurmJobState::kRunning)});
  auto same = SummarizeJobs({Job(3, SlurmJobState::kRunning), Job(1, SlurmJobState::kRunning),
                             Job(2, SlurmJobState::kPending)});
  EXPECT_EQ(before, same) << "order does not matter";
  EXPECT_EQ(DescribeJobChanges(before, same), "");
  auto after = SummarizeJobs({Job(1, SlurmJobState::kEnded), Job(2, SlurmJobState::kRunning),
                              Job(3, SlurmJobState::kRunning), Job(4, SlurmJobState::kPending)});
  EXPECT_EQ(DescribeJobChanges(before, after), "job 1 ended, job 2 started, job 4 submitted");
  EXPECT_EQ(DescribeJobChanges(before, after, 1), "job 1 ended and 2 more");
  auto purged = SummarizeJobs({Job(2, SlurmJobState::kRunning), Job(3, SlurmJobState::kRunning)});
  EXPECT_EQ(DescribeJobChanges(before, purged), "job 2 started, job 1 gone");
}

TEST(JobTableSummary, AnEndedJobReleasingItsNodesIsAnEvent) {
  auto running = SummarizeJobs({Job(7, SlurmJobState::kRunning)});
  JobInfo completing = Job(7, SlurmJobState::kEnded);
  completing.completing = true;
  auto ending = SummarizeJobs({completing});
  EXPECT_EQ(DescribeJobChanges(running, ending), "job 7 ended");
  auto released = SummarizeJobs({Job(7, SlurmJobState::kEnded)});
  EXPECT_EQ(DescribeJobChanges(ending, released), "job 7 released its nodes");
  EXPECT_EQ(DescribeJobChanges(running, released), "job 7 ended") << "both between two looks: one event";
  EXPECT_EQ(DescribeJobChanges(released, released), "");
}

TEST(JobTableSummary, ExtensionsAreNoEvents) {
  auto before = SummarizeJobs({Job(1, SlurmJobState::kRunning)});
  auto after = SummarizeJobs({Job(1, SlurmJobState::kRunning),
                              Job(5, SlurmJobState::kPending, "elastic-ext:1:1"),
                              Job(6, SlurmJobState::kRunning, "x", "elastic-ext parent=1 group=2")});
  EXPECT_EQ(DescribeJobChanges(before, after), "");
}

}  // namespace
}  // namespace elastic::controller
