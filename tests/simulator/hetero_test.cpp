// Unit tests of the simulator on several GPU types (hetero.h, cluster_file.h): the cluster-file
// parser and its messages, the per-type step-time lookup, the restart/move cost rule, and
// hand-computed schedules on a two-type fixture cluster under every policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "elastic/simulator/cluster_file.h"
#include "elastic/simulator/hetero.h"

namespace elastic::simulator {
namespace {

const std::string kFixtures = ELASTIC_SIM_FIXTURES;

// --- cluster file ------------------------------------------------------------------------

TEST(ClusterFile, ParsesTypesCommentsAndBlankLines) {
  Result<ClusterSpec> r = ParseClusterFile("# Sia's default\n\nt4 6 4 aws  # T4\na100 2 8 dgx-ext\nrtx 3 8 rtx\n", "c.txt");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ClusterSpec& c = r.value();
  ASSERT_EQ(c.types.size(), 3u);
  EXPECT_EQ(c.types[0].name, "t4");
  EXPECT_EQ(c.types[0].nodes, 6);
  EXPECT_EQ(c.types[0].gpus_per_node, 4);
  EXPECT_EQ(c.types[1].profile, "dgx-ext");
  EXPECT_EQ(c.TotalGpus(), 64);
  EXPECT_EQ(c.TypeIndex("rtx"), 2);
  EXPECT_EQ(c.TypeIndex("v100"), -1);
}

TEST(ClusterFile, ErrorsNameTheFileAndLine) {
  auto message = [](const std::string& text) {
    Result<ClusterSpec> r = ParseClusterFile(text, "c.txt");
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(message("t4 6 4\n"), "c.txt:1: expected 4 fields 'NAME NODES GPUS_PER_NODE PROFILE', got 3");
  EXPECT_EQ(message("# x\nt4 0 4 aws\n"), "c.txt:2: NODES: expected a whole number >= 1, got '0'");
  EXPECT_EQ(message("t4 6 4.5 aws\n"), "c.txt:1: GPUS_PER_NODE: expected a whole number from 1 to 9, got '4.5'");
  EXPECT_EQ(message("t4 6 4 k80\n"), "c.txt:1: unknown profile 'k80' (known: aws, azure, dgx, dgx-ext, quad, rtx)");
  EXPECT_EQ(message("t4 6 4 aws\nt4 1 8 rtx\n"), "c.txt:2: GPU type 't4' is listed twice");
  EXPECT_EQ(message("t/4 6 4 aws\n"), "c.txt:1: GPU type name 't/4': use letters, digits, '-', '_' or '.'");
  EXPECT_EQ(message("# nothing\n\n"), "c.txt: no GPU type (one line per type: NAME NODES GPUS_PER_NODE PROFILE)");
  Result<ClusterSpec> bad = ReadClusterFile(kFixtures + "/clusters/bad-nodes.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            kFixtures + "/clusters/bad-nodes.txt:3: GPUS_PER_NODE: expected a whole number from 1 to 9, got 'x'");
  Result<ClusterSpec> missing = ReadClusterFile(kFixtures + "/clusters/none.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kNotFound);
}

// --- per-type profiles, costs ------------------------------------------------------------

// apps/typed: one 1-GPU measurement per type, step 0.5 s on the aws profile and 1.0 s on the rtx
// profile at local batch 8 (0.3 s / 0.6 s at 4), no synchronisation share; one validated batch
// (8) with grad_sqr = 0, so a step at batch 8 adds one unit of progress; 1,000 units to finish.
TypedApps Typed() {
  TypedApps apps;
  for (const char* profile : {"aws", "rtx"}) {
    Result<std::shared_ptr<const Application>> a = LoadApplication(kFixtures + "/apps/typed", "typed", 1, 0, profile);
    EXPECT_TRUE(a.ok()) << a.status().message();
    if (a.ok()) apps[profile]["typed"] = a.value();
  }
  return apps;
}

TEST(TypedProfiles, StepTimesComeFromEachTypesFiles) {
  const TypedApps apps = Typed();
  ASSERT_EQ(apps.size(), 2u);
  EXPECT_DOUBLE_EQ(apps.at("aws").at("typed")->StepTime({1}, 8.0).step, 0.5);
  EXPECT_DOUBLE_EQ(apps.at("rtx").at("typed")->StepTime({1}, 8.0).step, 1.0);
  EXPECT_DOUBLE_EQ(apps.at("rtx").at("typed")->StepTime({1}, 6.0).step, 0.8);
  // A profile without files is an error naming the file it looked for.
  Result<std::shared_ptr<const Application>> none = LoadApplication(kFixtures + "/apps/typed", "typed", 1, 0, "quad");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("apps/typed/placements-quad.csv"), std::string::npos) << none.status().message();
}

TEST(TypedProfiles, RestartAndMoveCosts) {
  EXPECT_EQ(RestartCostS("imagenet"), 250.0);
  EXPECT_EQ(RestartCostS("bert"), 120.0);
  EXPECT_EQ(RestartCostS("yolov3"), 45.0);
  EXPECT_EQ(RestartCostS("cifar10"), 30.0);
  EXPECT_EQ(RestartCostS("deepspeech2"), 25.0);
  EXPECT_EQ(RestartCostS("anything"), 30.0);
  EXPECT_EQ(ChangeCostS("bert", 0, 4, 0, 4), 0.0);     // unchanged
  EXPECT_EQ(ChangeCostS("bert", -1, 0, 1, 2), 120.0);  // start or resume
  EXPECT_EQ(ChangeCostS("bert", 0, 4, 0, 8), 120.0);   // resize
  EXPECT_EQ(ChangeCostS("bert", 0, 4, 1, 4), 120.0);   // move at the same count
  EXPECT_EQ(ChangeCostS("bert", 0, 4, 1, 0), 0.0);     // preempted: nothing to pay now
  // Stop-free (this project's mechanism): only a resize on the job's type is a pause.
  const ChangeCosts stop_free{RescaleMode::kStopFree, 1.5, 0.25};
  EXPECT_EQ(ChangeCostS("bert", 0, 4, 0, 4, stop_free), 0.0);
  EXPECT_EQ(ChangeCostS("bert", 0, 4, 0, 8, stop_free), 1.5);    // grow
  EXPECT_EQ(ChangeCostS("bert", 0, 4, 0, 2, stop_free), 0.25);   // shrink
  EXPECT_EQ(ChangeCostS("bert", -1, 0, 0, 2, stop_free), 120.0);  // start or resume
  EXPECT_EQ(ChangeCostS("bert", 0, 4, 1, 4, stop_free), 120.0);   // move: checkpoint-requeue
  EXPECT_EQ(ChangeCostS("bert", 0, 4, 1, 8, stop_free), 120.0);
  EXPECT_EQ(ChangeCostS("bert", 0, 4, 1, 0, stop_free), 0.0);
  EXPECT_EQ(SiaSlowdown("cifar10"), 1.8);
  EXPECT_EQ(SiaSlowdown("ncf"), 1.5);
  EXPECT_EQ(SiaSlowdown("bert"), 1.2);
  EXPECT_EQ(SiaSlowdown("typed"), 1.0);
}

// --- hand-computed schedules ----------------------------------------------------------------

JobSpec Job(const std::string& name, double arrival) {
  JobSpec j;
  j.name = name;
  j.arrival_s = arrival;
  j.app = "typed";
  return j;
}

HeteroConfig TwoTypes(const std::string& policy) {
  HeteroConfig c;
  Result<ClusterSpec> cl = ReadClusterFile(kFixtures + "/clusters/two-types.txt");
  EXPECT_TRUE(cl.ok()) << cl.status().message();
  c.cluster = cl.value();
  c.policy = policy;
  c.sia_calibration = false;
  return c;
}

std::vector<double> Finishes(const SimResult& r) {
  std::vector<double> f;
  for (const JobResult& j : r.jobs) f.push_back(j.finish_s);
  std::sort(f.begin(), f.end());
  return f;
}

// One job alone takes the fast type: restart cost 30 s, then 1,000 units at 2 per second.
// Two jobs at t = 0: one on each type. The fast one ends at 530; at the epoch of 540 the slow one
// has done 510 units (from 30 s to 540 s at 1 per second) and moves to the fast type: 30 s of
// restart, then 490 units at 2 per second: it ends at 540 + 30 + 245 = 815 (staying: 1,030).
// The same under the stop-free mechanism: a start and a move to another type are restarts there too.
TEST(HandSchedule, EveryTypeAwarePolicyMovesTheSlowJobOnce) {
  const TypedApps apps = Typed();
  struct Variant {
    const char* policy;
    JobWeights weights;
    bool exact;
    RescaleMode mode;
  };
  std::vector<Variant> variants;
  for (RescaleMode mode : {RescaleMode::kRestart, RescaleMode::kStopFree}) {
    for (const Variant& v : {Variant{"sia", JobWeights::kUniform, false, mode}, Variant{"dp", JobWeights::kUniform, false, mode},
                             Variant{"dp", JobWeights::kUniform, true, mode}, Variant{"dp", JobWeights::kRemaining, true, mode}}) {
      variants.push_back(v);
    }
  }
  for (const Variant& v : variants) {
    SCOPED_TRACE(std::string(v.policy) + (v.weights == JobWeights::kRemaining ? "-srpt" : "") + (v.exact ? " exact" : "") +
                 (v.mode == RescaleMode::kStopFree ? " stop-free" : " restart"));
    HeteroConfig c = TwoTypes(v.policy);
    c.weights = v.weights;
    c.exact = v.exact;
    c.rescale.mode = v.mode;
    HeteroStats stats;
    Result<SimResult> alone = SimulateHetero(apps, {Job("a", 0.0)}, c);
    ASSERT_TRUE(alone.ok()) << alone.status().message();
    EXPECT_NEAR(alone.value().jobs[0].finish_s, 530.0, 1e-6);
    Result<SimResult> two = SimulateHetero(apps, {Job("a", 0.0), Job("b", 0.0)}, c, &stats);
    ASSERT_TRUE(two.ok()) << two.status().message();
    const std::vector<double> f = Finishes(two.value());
    EXPECT_NEAR(f[0], 530.0, 1e-6);
    EXPECT_NEAR(f[1], 815.0, 1e-6);
    EXPECT_EQ(stats.moves[0] + stats.moves[1], 1);
    EXPECT_EQ(two.value().jobs[0].rescales + two.value().jobs[1].rescales, 1);
    EXPECT_NEAR(stats.gpu_seconds_by_type[0].at("fast") + stats.gpu_seconds_by_type[1].at("fast"), 530.0 + 275.0, 1e-6);
  }
}

// Sia's calibration slows the ground truth: "typed" has no factor (1.0), so the schedule is the
// same; the type-unaware pollux policy sees one pool of the first type's speed and the simulator
// puts each job on one type.
TEST(HandSchedule, TypeUnawarePolicyUsesOneTypePerJob) {
  const TypedApps apps = Typed();
  HeteroConfig c = TwoTypes("pollux");
  c.sia_calibration = true;
  HeteroStats stats;
  Result<SimResult> r = SimulateHetero(apps, {Job("a", 0.0), Job("b", 0.0)}, c, &stats);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const JobResult& j : r.value().jobs) {
    EXPECT_TRUE(j.finished());
    EXPECT_EQ(j.max_gpus_used, 1);
  }
  // Both start at once, one per type: the fast one ends at 530, the other no later than staying
  // on the slow type (1,030).
  const std::vector<double> f = Finishes(r.value());
  EXPECT_NEAR(f[0], 530.0, 1e-6);
  EXPECT_LE(f[1], 1030.0 + 1e-6);
}

TEST(HandSchedule, Errors) {
  const TypedApps apps = Typed();
  Result<SimResult> r = SimulateHetero(apps, {Job("a", 0.0)}, TwoTypes("static"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kInvalidArgument);
  HeteroConfig exact = TwoTypes("pollux");
  exact.exact = true;
  EXPECT_FALSE(SimulateHetero(apps, {Job("a", 0.0)}, exact).ok());
  JobSpec other = Job("x", 0.0);
  other.app = "bert";
  r = SimulateHetero(apps, {other}, TwoTypes("sia"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "job 'x': application 'bert' has no profile 'aws'");
}

// --- CLI ---------------------------------------------------------------------------------

TEST(Cli, ClusterFileErrorsExitWithBadInput) {
  const std::string errfile = ::testing::TempDir() + "/elastic-sim-hetero-err-" + std::to_string(::getpid());
  auto run = [&](const std::string& args, std::string* err) {
    const int rc = std::system((std::string(ELASTIC_SIM_BIN) + " " + args + " >/dev/null 2>" + errfile).c_str());
    std::ifstream f(errfile);
    std::stringstream ss;
    ss << f.rdbuf();
    *err = ss.str();
    return WEXITSTATUS(rc);
  };
  std::string err;
  const std::string bad = kFixtures + "/clusters/bad-nodes.txt";
  EXPECT_EQ(run("--workload x.csv --cluster " + bad, &err), 3);
  EXPECT_EQ(err, "elastic-sim: " + bad + ":3: GPUS_PER_NODE: expected a whole number from 1 to 9, got 'x'\n");
  EXPECT_EQ(run("--workload x.csv --cluster " + bad + " --format philly", &err), 2);
  EXPECT_EQ(run("--workload x.csv --cluster " + bad + " --solver best", &err), 2);
  EXPECT_EQ(err, "elastic-sim: --solver: expected policy or exact, got 'best'\n");
  // Options that would be ignored on several types are refused.
  EXPECT_EQ(run("--workload x.csv --cluster " + bad + " --policy sia --objective power-mean", &err), 2);
  EXPECT_EQ(err, "elastic-sim: the sia policy has Sia's own objective: drop --objective, --p and --pending-penalty\n");
  EXPECT_EQ(run("--workload x.csv --cluster " + bad + " --policy sia --p -0.5", &err), 2);
  EXPECT_EQ(run("--workload x.csv --cluster " + bad + " --policy sia --pending-penalty pollux", &err), 2);
  EXPECT_EQ(run("--workload x.csv --cluster " + bad + " --policy sia --keep-running off", &err), 2);
  EXPECT_EQ(err, "elastic-sim: the sia policy preempts and keeps jobs as Sia's formulation does: drop --keep-running\n");
  EXPECT_EQ(run("--workload x.csv --cluster " + bad + " --model observed", &err), 2);
  EXPECT_NE(err.find("drop --model and --batch"), std::string::npos) << err;
}

}  // namespace
}  // namespace elastic::simulator
