// Fused sweeps in the simulator (label unit): the grouping rule, a hand-computed fused schedule,
// the invariants on a random workload (every trial completes, the GPUs are never over-committed,
// fused trials use no more GPU time than the same trials unfused), and the CLI's checks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "elastic/simulator/application.h"
#include "elastic/simulator/metrics.h"
#include "elastic/simulator/simulator.h"
#include "elastic/simulator/sweeps.h"
#include "elastic/simulator/workload.h"

namespace elastic::simulator {
namespace {

const std::string kFixtures = ELASTIC_SIM_FIXTURES;

// The "flat" profile (simulator_test.cpp): at batch 8 on one GPU a job makes 1 unit of progress
// per second and needs 400.
AppTable Flat() {
  Result<std::shared_ptr<const Application>> a = LoadApplication(kFixtures + "/apps/flat", "flat", 1);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return {{"flat", a.value()}, {"other", a.value()}};
}

JobSpec Trial(const std::string& name, double arrival, const std::string& user, const std::string& app = "flat",
              int gpus = 1) {
  JobSpec j;
  j.name = name;
  j.arrival_s = arrival;
  j.app = app;
  j.req_gpus = gpus;
  j.req_batch = 8 * gpus;
  j.user = user;
  return j;
}

TEST(GroupSweeps, SameSubmitterSameModelOneGpuWithinTheWindow) {
  const std::vector<JobSpec> jobs = {
      Trial("a0", 0, "u"),    Trial("a1", 100, "u"), Trial("b0", 150, "v"),          Trial("a2", 600, "u"),
      Trial("a3", 601, "u"),  Trial("c0", 50, "u", "other"), Trial("d0", 60, "u", "flat", 2), Trial("e0", 70, ""),
      Trial("e1", 80, ""),    Trial("a4", 1200, "u")};
  const std::vector<int> s = GroupSweeps(jobs, SweepRule{600.0});
  // a0, a1, a2 (600 s after a0: inside), then a3 and a4 open the next one; b0 and c0 are alone
  // (another submitter, another model), d0 asked for 2 GPUs, e0 and e1 have no submitter.
  EXPECT_EQ(s, (std::vector<int>{0, 0, -1, 0, 1, -1, -1, -1, -1, 1}));
  EXPECT_EQ(GroupSweeps(jobs, SweepRule{0.0}), std::vector<int>(jobs.size(), -1));
}

SimConfig Cluster(int nodes, int gpus_per_node, int fuse, const std::string& profile) {
  SimConfig c;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.policy = "dp";
  c.start_cost_s = 0.0;
  c.fuse_max_per_gpu = fuse;
  c.fuse_profile = profile;
  return c;
}

// One GPU, two trials: fused (1.6x at width 2) each trains at 0.8 units/s and both end at 500 s,
// each counting half the GPU: 250 GPU-seconds each. Unfused the second waits for the first
// (400 s, its GPU idle until the epoch at 420 s) and ends at 820 s.
TEST(FusedSchedule, TwoTrialsOnOneGpuHandValues) {
  const std::vector<JobSpec> jobs = {Trial("a", 0, "u"), Trial("b", 0, "u")};
  Result<SimResult> fused = Simulate(Flat(), jobs, Cluster(1, 1, 2, "2:1.6"));
  ASSERT_TRUE(fused.ok()) << fused.status().message();
  for (const JobResult& j : fused.value().jobs) {
    EXPECT_NEAR(j.finish_s, 500.0, 1e-9) << j.name;
    EXPECT_NEAR(j.gpu_seconds, 250.0, 1e-9) << j.name;
    EXPECT_EQ(j.rescales, 0) << j.name;
  }
  Result<SimResult> apart = Simulate(Flat(), jobs, Cluster(1, 1, 0, ""));
  ASSERT_TRUE(apart.ok());
  EXPECT_NEAR(apart.value().jobs[0].finish_s + apart.value().jobs[1].finish_s, 400.0 + 820.0, 1e-9);
  // At most one per GPU (--fuse 1): the sweep runs its trials one after the other, as unfused.
  Result<SimResult> one = Simulate(Flat(), jobs, Cluster(1, 1, 1, "2:1.6"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(JobsCsv(one.value()), JobsCsv(apart.value()));
}

// One GPU, profile 1, 1.6, 2.1. a arrives alone and trains alone (60 units by t = 60); b and c
// join at t = 60: the GPU's array is widened to 3 (a pays the 30 s restart, b and c start at
// 0.7 units/s), a ends at 90 + 340 / 0.7 = 575.71 s; b and c, 378 units at t = 600, go on as an
// array of 2 (0.8 units/s each) without a restart and end at 600 + 22 / 0.8 = 627.5 s.
TEST(FusedSchedule, EndedTrialsLeaveTheArrayWithoutARestart) {
  const std::vector<JobSpec> jobs = {Trial("a", 0, "u"), Trial("b", 30, "u"), Trial("c", 30, "u")};
  SimConfig c = Cluster(1, 1, 3, "2:1.6,3:2.1");
  c.restart_cost_s = 30.0;
  Result<SimResult> r = Simulate(Flat(), jobs, c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::vector<JobResult>& j = r.value().jobs;
  EXPECT_NEAR(j[0].finish_s, 90.0 + 340.0 / 0.7, 1e-6);
  EXPECT_NEAR(j[1].finish_s, 627.5, 1e-6);
  EXPECT_NEAR(j[2].finish_s, 627.5, 1e-6);
  EXPECT_EQ(j[0].rescales, 1);
  EXPECT_EQ(j[1].rescales, 0);
  EXPECT_EQ(j[2].rescales, 0);
  EXPECT_NEAR(j[0].gpu_seconds, 60.0 + (30.0 + 340.0 / 0.7) / 3.0, 1e-6);  // its third of the GPU from t = 60
  EXPECT_NEAR(j[1].gpu_seconds, 540.0 / 3.0 + 27.5 / 2.0, 1e-6);
}

// A random workload of three submitters on 2 x 2 GPUs: with fusion every trial ends, no epoch
// holds more GPUs than the cluster has, and the trials use no more GPU time than unfused.
TEST(FusedSchedule, InvariantsOnARandomWorkload) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> arrival(0.0, 1800.0);
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 24; ++i) {
    const int u = static_cast<int>(rng() % 3);
    jobs.push_back(Trial("t" + std::to_string(i), arrival(rng), "u" + std::to_string(u), u == 2 ? "other" : "flat",
                         i % 7 == 0 ? 2 : 1));
  }
  std::sort(jobs.begin(), jobs.end(), [](const JobSpec& a, const JobSpec& b) { return a.arrival_s < b.arrival_s; });
  const std::vector<int> sweeps = GroupSweeps(jobs, SweepRule{});
  ASSERT_GT(std::count_if(sweeps.begin(), sweeps.end(), [](int s) { return s >= 0; }), 10);
  Result<SimResult> fused = Simulate(Flat(), jobs, Cluster(2, 2, 4, "2:1.6,4:2.4"));
  Result<SimResult> apart = Simulate(Flat(), jobs, Cluster(2, 2, 0, ""));
  ASSERT_TRUE(fused.ok()) << fused.status().message();
  ASSERT_TRUE(apart.ok());
  const Summary f = Summarise(fused.value()), a = Summarise(apart.value());
  EXPECT_EQ(f.jobs_finished, jobs.size());
  EXPECT_EQ(a.jobs_finished, jobs.size());
  for (const EpochRecord& e : fused.value().epochs) EXPECT_LE(e.gpus_allocated, 4) << e.time_s;
  EXPECT_LE(f.gpu_hours, a.gpu_hours);
  EXPECT_LT(f.makespan_s, a.makespan_s);
  // Every fused trial ran on one GPU (or a share of one).
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (sweeps[i] >= 0) {
      EXPECT_EQ(fused.value().jobs[i].max_gpus_used, 1) << jobs[i].name;
    }
  }
}

TEST(FusedSchedule, ErrorsSayWhatToDo) {
  const std::vector<JobSpec> jobs = {Trial("a", 0, "u"), Trial("b", 0, "u")};
  SimConfig c = Cluster(1, 1, 2, "2:3");
  Result<SimResult> r = Simulate(Flat(), jobs, c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "--fuse-profile: fusion profile '2:3': width 2 has speedup 3.000000; expected a number in (0, 2]");
  c = Cluster(1, 1, 2, "");
  c.policy = "fifo";
  r = Simulate(Flat(), jobs, c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fused sweeps need an optimizer policy"), std::string::npos);
}

int RunCli(const std::string& args, std::string* err) {
  const std::string errfile = testing::TempDir() + "/fusion_cli_err.txt";
  const int rc = std::system((std::string(ELASTIC_SIM_BIN) + " " + args + " >/dev/null 2>" + errfile).c_str());
  std::ifstream f(errfile);
  std::stringstream ss;
  ss << f.rdbuf();
  *err = ss.str();
  return WEXITSTATUS(rc);
}

TEST(FusedCli, OptionsAreChecked) {
  std::string err;
  EXPECT_EQ(RunCli("--workload x.csv --fuse 4", &err), 2);
  EXPECT_EQ(err,
            "elastic-sim: --fuse groups one-GPU jobs into sweeps by their submitter, which only --format philly gives "
            "(its virtual clusters), on one GPU type, not --isolated\n");
  EXPECT_EQ(RunCli("--workload x.csv --fuse-profile cpu-mlp", &err), 2);
  EXPECT_EQ(err, "elastic-sim: --fuse-profile and --fuse-window need --fuse N\n");
  EXPECT_EQ(RunCli("--workload x.csv --fuse -1", &err), 2);
  EXPECT_EQ(err, "elastic-sim: --fuse: expected 0 (off) or the most trials per GPU, got -1\n");
}

}  // namespace
}  // namespace elastic::simulator
