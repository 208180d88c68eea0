// Unit tests of simulator/: hand-computed schedules on tiny workloads, determinism, readers on
// fixtures (with exact error messages), the Philly mapping rule, profile interpolation.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>

#include "elastic/simulator/application.h"
#include "elastic/simulator/metrics.h"
#include "elastic/simulator/simulator.h"
#include "elastic/simulator/workload.h"

namespace elastic::simulator {
namespace {

const std::string kFixtures = ELASTIC_SIM_FIXTURES;

std::shared_ptr<const Application> Flat() {
  static std::shared_ptr<const Application> app = [] {
    Result<std::shared_ptr<const Application>> a = LoadApplication(kFixtures + "/apps/flat", "flat", 1);
    EXPECT_TRUE(a.ok()) << a.status().message();
    return a.value();
  }();
  return app;
}

AppTable FlatTable() { return {{"flat", Flat()}}; }

JobSpec Spec(const std::string& name, double arrival, int gpus, int64_t batch) {
  JobSpec j;
  j.name = name;
  j.arrival_s = arrival;
  j.app = "flat";
  j.req_gpus = gpus;
  j.req_batch = batch;
  return j;
}

// 2 nodes x 2 GPUs, 60 s epochs, no start cost.
SimConfig TinyCluster(const std::string& policy) {
  SimConfig c;
  c.nodes = 2;
  c.gpus_per_node = 2;
  c.policy = policy;
  c.start_cost_s = 0.0;
  return c;
}

const JobResult& Find(const SimResult& r, std::string_view name) {
  for (const JobResult& j : r.jobs) {
    if (j.name == name) return j;
  }
  throw std::runtime_error("no job " + std::string(name));
}

// The "flat" profile: step 1.0 s on 1 GPU, 1.2 s on 2 GPUs, 1.5 s on 4 (2 nodes), local batch 8,
// no synchronisation share; grad_sqr = 0 so a step at batch B makes B/8 units of progress. A job
// needs 400 units: at batch 32 it runs 1.0 (1 GPU, 3 accumulation steps: 4 s per 4 units),
// 1.6667 (2 GPUs) or 2.6667 (4 GPUs) units per second.
TEST(FlatProfile, RatesAreTheHandValues) {
  const Application& a = *Flat();
  EXPECT_EQ(a.init_batch, 8);
  EXPECT_EQ(a.min_local_batch, 8);
  EXPECT_DOUBLE_EQ(a.TargetProgress(), 400.0);
  EXPECT_DOUBLE_EQ(a.StepTime({2, 0}, 8).step, 1.2);
  EXPECT_DOUBLE_EQ(a.StepTime({0, 2, 2}, 8).step, 1.5);
  EXPECT_DOUBLE_EQ(a.StepTime({1, 1}, 8).step, 1.2);
}

// FIFO with EASY backfill. a (2 GPUs, batch 16: 240 s) starts at 0; b (4 GPUs: 150 s) must wait
// for a and reserves t = 240; c (1 GPU, batch 8: 400 s) would delay b's reservation and is not
// backfilled. a ends at 240; at the epoch t = 240 b starts and ends at 390; c starts at the
// epoch t = 420 and ends at 820.
TEST(HandSchedule, FifoBackfillRespectsTheReservation) {
  std::vector<JobSpec> jobs = {Spec("a", 0, 2, 16), Spec("b", 0, 4, 32), Spec("c", 0, 1, 8)};
  Result<SimResult> r = Simulate(FlatTable(), jobs, TinyCluster("fifo"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(Find(r.value(), "a").finish_s, 240.0, 1e-9);
  EXPECT_NEAR(Find(r.value(), "b").start_s, 240.0, 1e-9);
  EXPECT_NEAR(Find(r.value(), "b").finish_s, 390.0, 1e-9);
  EXPECT_NEAR(Find(r.value(), "c").start_s, 420.0, 1e-9);
  EXPECT_NEAR(Find(r.value(), "c").finish_s, 820.0, 1e-9);
  const Summary s = Summarise(r.value());
  EXPECT_NEAR(s.avg_jct_s, (240.0 + 390.0 + 820.0) / 3.0, 1e-9);
  EXPECT_NEAR(s.makespan_s, 820.0, 1e-9);
  // GPU time: a 2 x 240, b 4 x 150, c 1 x 400.
  EXPECT_NEAR(s.gpu_hours, (480.0 + 600.0 + 400.0) / 3600.0, 1e-9);
  EXPECT_EQ(s.rescales_per_job, 0.0);
}

// The optimizer's static policy admits first come first served without a reservation: c runs
// at once (0..400) and b starts only at the epoch t = 420 (ends 570).
TEST(HandSchedule, StaticFirstFitHasNoReservation) {
  std::vector<JobSpec> jobs = {Spec("a", 0, 2, 16), Spec("b", 0, 4, 32), Spec("c", 0, 1, 8)};
  Result<SimResult> r = Simulate(FlatTable(), jobs, TinyCluster("static"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(Find(r.value(), "a").finish_s, 240.0, 1e-9);
  EXPECT_NEAR(Find(r.value(), "c").finish_s, 400.0, 1e-9);
  EXPECT_NEAR(Find(r.value(), "b").finish_s, 570.0, 1e-9);
}

// A start cost delays every job by that much after it gets GPUs.
TEST(HandSchedule, StartCostDelaysTheStart) {
  SimConfig c = TinyCluster("fifo");
  c.start_cost_s = 30.0;
  Result<SimResult> r = Simulate(FlatTable(), {Spec("a", 0, 2, 16), Spec("b", 10, 4, 32)}, c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // a: 30 + 240 = 270; b starts at the epoch t = 300, ends 300 + 30 + 150 = 480 (JCT 470).
  EXPECT_NEAR(Find(r.value(), "a").finish_s, 270.0, 1e-9);
  EXPECT_NEAR(Find(r.value(), "b").finish_s, 480.0, 1e-9);
  EXPECT_NEAR(Find(r.value(), "b").jct(), 470.0, 1e-9);
}

// Elastic dp, batch frozen at 32, stop-free rescaling (grow 1 s, shrink 0.1 s).
// t=0: a alone takes 4 GPUs (speedup 2.67); b arrives at 30.
// t=60: a has 160 units; sum of speedups: (2, 2) = 3.33 beats keeping a at 4 (2.67): a shrinks
// (0.1 s pause) and finishes its 240 units at 1.6667/s: 60.1 + 144 = 204.1. b starts at 60 on 2
// GPUs; at t=240 it has 300 units, grows to 4 (1 s pause) and needs 37.5 s: ends at 278.5.
TEST(HandSchedule, ElasticDpStopFree) {
  SimConfig c = TinyCluster("dp");
  c.batch_frozen = true;
  c.rescale = RescaleMode::kStopFree;
  c.grow_cost_s = 1.0;
  c.shrink_cost_s = 0.1;
  Result<SimResult> r = Simulate(FlatTable(), {Spec("a", 0, 1, 32), Spec("b", 30, 1, 32)}, c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const JobResult& a = Find(r.value(), "a");
  const JobResult& b = Find(r.value(), "b");
  EXPECT_NEAR(a.finish_s, 204.1, 1e-9);
  EXPECT_EQ(a.rescales, 1);
  EXPECT_EQ(a.max_gpus_used, 4);
  EXPECT_NEAR(b.start_s, 60.0, 1e-9);
  EXPECT_NEAR(b.finish_s, 278.5, 1e-9);
  EXPECT_NEAR(b.jct(), 248.5, 1e-9);
  EXPECT_EQ(b.rescales, 1);
  // GPU time: a 4 x 60 + 2 x 144.1; b 2 x 180 + 4 x 38.5.
  EXPECT_NEAR(Summarise(r.value()).gpu_hours, (240.0 + 288.2 + 360.0 + 154.0) / 3600.0, 1e-9);
}

// The same with checkpoint-restart rescaling (30 s per change; no penalty in the objective so
// the plan is the same): a ends at 60 + 30 + 144 = 234; b has 300 units at t=240 and ends at
// 240 + 30 + 37.5 = 307.5.
TEST(HandSchedule, ElasticDpRestart) {
  SimConfig c = TinyCluster("dp");
  c.batch_frozen = true;
  c.rescale = RescaleMode::kRestart;
  c.restart_cost_s = 30.0;
  c.penalty_cost_s = 0.0;
  Result<SimResult> r = Simulate(FlatTable(), {Spec("a", 0, 1, 32), Spec("b", 30, 1, 32)}, c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(Find(r.value(), "a").finish_s, 234.0, 1e-9);
  EXPECT_NEAR(Find(r.value(), "b").finish_s, 307.5, 1e-9);
}

TEST(HandSchedule, HorizonCountsJobsDoneByThen) {
  std::vector<JobSpec> jobs = {Spec("a", 0, 2, 16), Spec("b", 0, 4, 32), Spec("c", 0, 1, 8)};
  Result<SimResult> r = Simulate(FlatTable(), jobs, TinyCluster("fifo"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Summarise(r.value(), 400.0).jobs_finished, 2u);
  EXPECT_EQ(Summarise(r.value(), 400.0).jobs_finished_all, 3u);
  EXPECT_EQ(Summarise(r.value()).jobs_finished, 3u);
}

// Each job alone (the jobs of ElasticDpStopFree): a takes all 4 GPUs from t=0 and needs
// 400 / 2.6667 = 150 s; b arrives at 30, starts at the epoch t=60 on all 4 GPUs, ends at 210
// (JCT 180). By t=200 only a could finish.
TEST(HandSchedule, IsolatedRunsEveryJobAlone) {
  SimConfig c = TinyCluster("dp");
  c.batch_frozen = true;
  c.rescale = RescaleMode::kStopFree;
  Result<SimResult> r = SimulateIsolated(FlatTable(), {Spec("a", 0, 1, 32), Spec("b", 30, 1, 32)}, c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(Find(r.value(), "a").finish_s, 150.0, 1e-9);
  EXPECT_NEAR(Find(r.value(), "b").start_s, 60.0, 1e-9);
  EXPECT_NEAR(Find(r.value(), "b").jct(), 180.0, 1e-9);
  const Summary s = Summarise(r.value(), 200.0);
  EXPECT_EQ(s.jobs_finished, 1u);
  EXPECT_NEAR(s.avg_jct_s, 165.0, 1e-9);
  EXPECT_EQ(s.utilisation, 0.0);
  EXPECT_TRUE(r.value().epochs.empty());
}

std::vector<JobSpec> RandomJobs(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> arrival(0.0, 600.0);
  std::uniform_int_distribution<int> gpus(1, 4);
  std::vector<JobSpec> jobs;
  for (size_t i = 0; i < n; ++i) {
    const int g = gpus(rng);
    jobs.push_back(Spec("j" + std::to_string(i), arrival(rng), g, 8 * g));
  }
  std::sort(jobs.begin(), jobs.end(), [](const JobSpec& a, const JobSpec& b) { return a.arrival_s < b.arrival_s; });
  return jobs;
}

// Same seed, same results, for every policy (the genetic ones draw random numbers).
TEST(Determinism, SameSeedSameResults) {
  const std::vector<JobSpec> jobs = RandomJobs(7, 12);
  for (const char* policy : {"dp", "greedy", "evolutionary", "pollux", "optimus", "static", "fifo"}) {
    SimConfig c = TinyCluster(policy);
    c.nodes = 3;
    c.seed = 11;
    Result<SimResult> r1 = Simulate(FlatTable(), jobs, c);
    Result<SimResult> r2 = Simulate(FlatTable(), jobs, c);
    ASSERT_TRUE(r1.ok()) << policy << ": " << r1.status().message();
    ASSERT_TRUE(r2.ok()) << policy;
    EXPECT_EQ(JobsCsv(r1.value()), JobsCsv(r2.value())) << policy;
    EXPECT_EQ(EpochsCsv(r1.value()), EpochsCsv(r2.value())) << policy;
    EXPECT_EQ(Summarise(r1.value()).jobs_finished, jobs.size()) << policy;
  }
}

// --weights remaining reaches the optimizer: a payback of 1000 (a rescale must save 1000 x 1 s)
// forbids every move of these short jobs that payback 0 (the age-based penalty) allows, and the
// weights change who runs first.
TEST(Simulate, RemainingTimeObjectiveReachesTheOptimizer) {
  const std::vector<JobSpec> jobs = {Spec("a", 0, 1, 32), Spec("b", 30, 1, 32), Spec("c", 90, 1, 32),
                                     Spec("d", 200, 1, 32), Spec("e", 250, 1, 32)};
  SimConfig c = TinyCluster("dp");
  c.batch_frozen = true;  // batch 32: 1, 2 or 4 GPUs
  c.rescale = RescaleMode::kStopFree;
  c.weights = JobWeights::kRemaining;
  c.rescale_payback = 0.0;
  Result<SimResult> free_moves = Simulate(FlatTable(), jobs, c);
  c.rescale_payback = 1000.0;
  Result<SimResult> no_moves = Simulate(FlatTable(), jobs, c);
  ASSERT_TRUE(free_moves.ok() && no_moves.ok());
  EXPECT_GT(Summarise(free_moves.value()).rescales_per_job, 0.0);
  EXPECT_EQ(Summarise(no_moves.value()).rescales_per_job, 0.0);
  c.weights = JobWeights::kUniform;
  Result<SimResult> uniform = Simulate(FlatTable(), jobs, c);
  ASSERT_TRUE(uniform.ok());
  EXPECT_NE(JobsCsv(uniform.value()), JobsCsv(free_moves.value()));
}

TEST(Simulate, UnknownPolicyAndApplication) {
  Result<SimResult> r = Simulate(FlatTable(), {Spec("a", 0, 1, 8)}, TinyCluster("tiresias"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "unknown policy 'tiresias' (known: dp, greedy, optimus, static, evolutionary, pollux, fifo)");
  JobSpec bad = Spec("a", 0, 1, 8);
  bad.app = "resnet";
  r = Simulate(FlatTable(), {bad}, TinyCluster("dp"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "job 'a': unknown application 'resnet'");
}

// --- Application profiles ---------------------------------------------------------------

TEST(Application, NormalisePlacement) {
  EXPECT_EQ(NormalisePlacement({2, 1, 1, 1}), "1112");
  EXPECT_EQ(NormalisePlacement({0, 4, 0, 3}), "34");
  EXPECT_EQ(NormalisePlacement({2, 1, 2, 1}), "1212");
  EXPECT_EQ(NormalisePlacement({1}), "1");
}

TEST(Application, InterpolationAndStatistics) {
  Result<std::shared_ptr<const Application>> r = LoadApplication(kFixtures + "/apps/curve", "curve", 2);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Application& a = *r.value();
  EXPECT_EQ(a.init_batch, 10);
  EXPECT_EQ(a.max_batch, 40);
  EXPECT_EQ(a.min_local_batch, 10);
  EXPECT_EQ(a.max_local_batch, 20);
  // Measured placement, linear in the local batch, clamped outside.
  EXPECT_DOUBLE_EQ(a.StepTime({1}, 15).step, 1.25);
  EXPECT_DOUBLE_EQ(a.StepTime({1}, 40).step, 1.5);
  EXPECT_DOUBLE_EQ(a.StepTime({1}, 5).step, 1.0);
  // "211" normalises to the measured "112".
  EXPECT_DOUBLE_EQ(a.StepTime({2, 1, 1}, 10).step, 2.0);
  // 6 nodes, 9 replicas: halfway between the (6, 6) and (6, 12) rows.
  EXPECT_DOUBLE_EQ(a.StepTime({2, 2, 2, 1, 1, 1}, 10).step, 3.5);
  EXPECT_DOUBLE_EQ(a.StepTime({2, 2, 2, 1, 1, 1}, 10).sync, 1.5);
  // 4 nodes, 4 replicas: between 3 nodes (4 replicas clamped to the measured 4: 2.0) and 6 nodes
  // (6 replicas: 3.0), one third of the way.
  EXPECT_NEAR(a.StepTime({1, 1, 1, 1}, 10).step, 2.0 + (3.0 - 2.0) / 3.0, 1e-12);
  // Gradient statistics: linear between validated batches 10 and 40, per epoch.
  EXPECT_DOUBLE_EQ(a.Stats(10, 0).sqr, 4.0);
  EXPECT_DOUBLE_EQ(a.Stats(20, 0).sqr, 4.0 + (8.0 - 4.0) / 3.0);
  EXPECT_DOUBLE_EQ(a.Stats(40, 1).var, 10.0);
  EXPECT_DOUBLE_EQ(a.Stats(100, 1).var, 10.0);
  // Progress per epoch: the smallest over the curves.
  EXPECT_DOUBLE_EQ(a.ProgressAt(1), 100.0);
  EXPECT_DOUBLE_EQ(a.TargetProgress(), 200.0);
}

TEST(Application, TooFewEpochs) {
  Result<std::shared_ptr<const Application>> r = LoadApplication(kFixtures + "/apps/curve", "curve", 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), kFixtures + "/apps/curve: curve: validation-10.csv has 2 epochs, 3 needed");
}

// --- Workload readers ---------------------------------------------------------------------

TEST(Readers, PolluxWorkload) {
  Result<std::vector<JobSpec>> r = ReadPolluxWorkload(kFixtures + "/workload-good.csv", FlatTable());
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r.value().size(), 2u);
  EXPECT_EQ(r.value()[0].name, "b");  // sorted by arrival
  EXPECT_EQ(r.value()[0].req_gpus, 4);
  EXPECT_EQ(r.value()[0].req_batch, 32);
  EXPECT_DOUBLE_EQ(r.value()[1].arrival_s, 10.0);
}

TEST(Readers, PolluxWorkloadErrors) {
  const struct {
    const char* file;
    std::string message;
  } cases[] = {
      {"workload-bad-fields.csv", "/workload-bad-fields.csv:3: expected 5 fields, got 4"},
      {"workload-bad-app.csv", "/workload-bad-app.csv:2: column application: unknown application 'resnet' (known: flat)"},
      {"workload-bad-number.csv", "/workload-bad-number.csv:3: column time: expected a number, got 'ten'"},
      {"workload-bad-replicas.csv", "/workload-bad-replicas.csv:2: column num_replicas: must be >= 1"},
      {"missing.csv", "/missing.csv: cannot open"},
  };
  for (const auto& c : cases) {
    Result<std::vector<JobSpec>> r = ReadPolluxWorkload(kFixtures + "/" + c.file, FlatTable());
    ASSERT_FALSE(r.ok()) << c.file;
    EXPECT_EQ(r.status().message(), kFixtures + c.message);
  }
  Result<std::vector<JobSpec>> r = ParsePolluxWorkload("name,time\n", "x.csv", FlatTable());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "x.csv: expected columns name,time,application,num_replicas,batch_size");
}

AppTable AllPolluxNamesAreFlat() {
  AppTable t;
  for (const char* n : {"cifar10", "ncf", "bert", "deepspeech2", "yolov3", "imagenet"}) t[n] = Flat();
  return t;
}

TEST(Readers, PhillyMappingRule) {
  std::mt19937_64 rng(3);
  int cifar = 0, ncf = 0, bert = 0, ds2 = 0;
  for (int i = 0; i < 400; ++i) {
    const std::string a = MapByGpuTime(3599.0, rng);
    cifar += a == "cifar10";
    ncf += a == "ncf";
    const std::string b = MapByGpuTime(3600.0, rng);
    bert += b == "bert";
    ds2 += b == "deepspeech2";
  }
  EXPECT_EQ(cifar + ncf, 400);
  EXPECT_EQ(bert + ds2, 400);
  EXPECT_GT(cifar, 150);  // a fair coin
  EXPECT_GT(ncf, 150);
  EXPECT_GT(bert, 150);
  EXPECT_GT(ds2, 150);
  EXPECT_EQ(MapByGpuTime(10 * 3600.0 - 1, rng).find("yolov3"), std::string::npos);
  EXPECT_EQ(MapByGpuTime(10 * 3600.0, rng), "yolov3");
  EXPECT_EQ(MapByGpuTime(100 * 3600.0 - 1, rng), "yolov3");
  EXPECT_EQ(MapByGpuTime(100 * 3600.0, rng), "imagenet");
}

TEST(Readers, PhillyWindow) {
  PhillyWindow w;
  w.start = "2017-10-09 07:30:00";
  w.hours = 8.0;
  Result<std::vector<JobSpec>> r = ReadPhillyWindow(kFixtures + "/philly.csv", w, AllPolluxNamesAreFlat());
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r.value().size(), 2u);  // 08:00 and 09:30; 07:00 is before, 20:00 after
  EXPECT_DOUBLE_EQ(r.value()[0].arrival_s, 1800.0);
  EXPECT_TRUE(r.value()[0].app == "bert" || r.value()[0].app == "deepspeech2");  // 4 GPU-hours
  EXPECT_EQ(r.value()[0].req_gpus, 1);  // the flat profile allows batch 8 = one local batch
  EXPECT_DOUBLE_EQ(r.value()[1].arrival_s, 7200.0);
  EXPECT_EQ(r.value()[1].app, "imagenet");  // 100 GPU-hours
  w.start = "09/10/2017";
  r = ReadPhillyWindow(kFixtures + "/philly.csv", w, AllPolluxNamesAreFlat());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "--philly-start: expected a time YYYY-MM-DD HH:MM:SS, got '09/10/2017'");
}

TEST(Readers, Sacct) {
  Result<std::vector<JobSpec>> r = ReadSacct(kFixtures + "/sacct.txt", AllPolluxNamesAreFlat(), 64, 1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r.value().size(), 2u);  // the CPU-only job is skipped
  EXPECT_EQ(r.value()[0].name, "101-train");
  EXPECT_DOUBLE_EQ(r.value()[0].arrival_s, 0.0);
  EXPECT_TRUE(r.value()[0].app == "bert" || r.value()[0].app == "deepspeech2");  // exactly 1 GPU-hour
  EXPECT_EQ(r.value()[1].name, "103-big");
  EXPECT_DOUBLE_EQ(r.value()[1].arrival_s, 600.0);
  EXPECT_EQ(r.value()[1].app, "imagenet");  // 8 x 100 h
  r = ReadSacct(kFixtures + "/sacct-bad.txt", AllPolluxNamesAreFlat(), 64, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            kFixtures + "/sacct-bad.txt:2: column Submit: expected a time YYYY-MM-DD HH:MM:SS, got 'yesterday'");
  r = ParseSacct("JobID|Submit\n1|2023-01-01T00:00:00\n", "s.txt", AllPolluxNamesAreFlat(), 64, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "s.txt: expected sacct -P columns Submit, ElapsedRaw and AllocTRES (JobID, JobName optional)");
}

TEST(Readers, SacctJsonMatchesSacctP) {
  // The same three jobs as sacct.txt, exported with `sacct -X --json`: the same jobs result.
  Result<std::vector<JobSpec>> p = ReadSacct(kFixtures + "/sacct.txt", AllPolluxNamesAreFlat(), 64, 1);
  Result<std::vector<JobSpec>> j = ReadSacct(kFixtures + "/sacct.json", AllPolluxNamesAreFlat(), 64, 1);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(j.ok()) << j.status().message();
  ASSERT_EQ(j.value().size(), 2u);  // the CPU-only job is skipped
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(j.value()[i].name, p.value()[i].name);
    EXPECT_EQ(j.value()[i].app, p.value()[i].app);
    EXPECT_DOUBLE_EQ(j.value()[i].arrival_s, p.value()[i].arrival_s);
    EXPECT_EQ(j.value()[i].req_gpus, p.value()[i].req_gpus);
  }
  EXPECT_EQ(j.value()[1].app, "imagenet");  // 8 GPUs x 100 h
}

TEST(Readers, SacctJsonErrors) {
  const AppTable apps = AllPolluxNamesAreFlat();
  auto message = [&](const std::string& text) {
    Result<std::vector<JobSpec>> r = ParseSacct(text, "s.json", apps, 64, 1);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(message("{\"jobs\": ["), "s.json: not valid JSON (expected sacct --json)");
  EXPECT_EQ(message("{\"meta\": {}}"), "s.json: no \"jobs\" array (expected sacct --json)");
  EXPECT_EQ(message("{\"jobs\": [7]}"), "s.json: jobs[0]: not an object");
  const std::string gpu = R"("tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]})";
  EXPECT_EQ(message(R"({"jobs": [{)" + gpu + "}]}"), "s.json: jobs[0]: no \"time\" object");
  EXPECT_EQ(message(R"({"jobs": [{"time": {"submission": "noon", "elapsed": 5}, )" + gpu + "}]}"),
            "s.json: jobs[0]: time.submission is not an integer");
  EXPECT_EQ(message(R"({"jobs": [{"time": {"submission": 5, "elapsed": -1}, )" + gpu + "}]}"),
            "s.json: jobs[0]: time.elapsed must be >= 0");
  EXPECT_EQ(message(R"({"jobs": [{"time": {"submission": 5, "elapsed": 1},
                        "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2.5}]}}]})"),
            "s.json: jobs[0]: tres.allocated gres/gpu count is not an integer");
  // A job that never got GPUs (pending, cancelled before start) is not an error: it is skipped.
  EXPECT_EQ(message(R"({"jobs": [{"time": {"submission": 5, "elapsed": 0}, "tres": {"allocated": []}}]})"), "ok");
}

// --- CLI ---------------------------------------------------------------------------------

int RunCli(const std::string& args, std::string* err) {
  const std::string errfile = ::testing::TempDir() + "/elastic-sim-err-" + std::to_string(::getpid());
  const int rc = std::system((std::string(ELASTIC_SIM_BIN) + " " + args + " >/dev/null 2>" + errfile).c_str());
  std::ifstream f(errfile);
  std::stringstream ss;
  ss << f.rdbuf();
  *err = ss.str();
  return WEXITSTATUS(rc);
}

TEST(Cli, ExitCodesAndMessages) {
  std::string err;
  EXPECT_EQ(RunCli("--help", &err), 0);
  EXPECT_EQ(RunCli("--policy dp", &err), 2);
  EXPECT_NE(err.find("elastic-sim: --workload is required"), std::string::npos) << err;
  EXPECT_EQ(RunCli("--workload x.csv --rescale sometimes", &err), 2);
  EXPECT_EQ(err, "elastic-sim: --rescale: expected restart or stop-free, got 'sometimes'\n");
  EXPECT_EQ(RunCli("--workload x.csv --bogus", &err), 2);
  EXPECT_EQ(RunCli("--workload x.csv --data-dir /nonexistent", &err), 3);
  EXPECT_EQ(err, "elastic-sim: /nonexistent/pollux-adaptdl-osdi21/traces/bert/placements.csv: cannot open\n");
}

}  // namespace
}  // namespace elastic::simulator
