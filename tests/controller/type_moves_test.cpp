// Jobs across GPU types (controller/src/type_moves.h, moves.cpp): a job's speed per type, measured
// or from the site's table; the move rule; the samples kept per type; the record that carries
// them; and, on generated snapshots (no Slurm), the epoch's move decisions and the move's first
// steps.
#include <gtest/gtest.h>

#include "controller.h"
#include "db.h"
#include "snapshot.h"
#include "type_moves.h"

namespace elastic::controller {
namespace {

std::unique_ptr<Controller> MakeController(const RecordedSnapshot& snap, ControllerConfig cfg = {}) {
  auto db = Database::Open(":memory:");
  EXPECT_TRUE(db.ok());
  SeedRegistry(*db.value(), snap.registry);
  cfg.min_rescale_interval_s = 0;
  cfg.fit_budget_ms = 600000;  // every model fitted in the first epoch, however slow the build
  return std::make_unique<Controller>(cfg, std::move(db).value(), nullptr);
}

// A job at 2 GPUs on v100 that accepts a100 and v100: 320 samples/s per GPU measured at its base
// size (a sample at 4 GPUs does not count), 640 * 600 samples left.
ElasticJob V100Job() {
  ElasticJob job;
  job.id = 7;
  job.gpu_type = "v100";
  job.base_gpus = 2;
  job.spec = {{"gpus_min", 2}, {"gpus_max", 4}, {"gpu_types", "a100,v100"}};
  job.samples = {{1, 2, 32, 0.1}, {1, 2, 32, 0.1}, {1, 4, 32, 0.5}};
  job.total_samples = 1000000;
  job.samples_done = 1000000 - 640 * 600;
  return job;
}

TEST(TypeMovesTest, SpeedIsMeasuredHereAndBootstrappedElsewhere) {
  ElasticJob job = V100Job();
  ControllerConfig cfg;
  ASSERT_TRUE(MeasuredSpeedPerGpu(job).has_value());
  EXPECT_DOUBLE_EQ(*MeasuredSpeedPerGpu(job), 320);
  EXPECT_DOUBLE_EQ(*SpeedPerGpu(job, "v100", cfg), 320);
  EXPECT_DOUBLE_EQ(*SpeedPerGpu(job, "a100", cfg), 320);  // no table: every type counts 1
  cfg.type_speed = {{"a100", 3.0}, {"v100", 1.5}};
  EXPECT_DOUBLE_EQ(*SpeedPerGpu(job, "a100", cfg), 640);  // 320 x 3 / 1.5
  EXPECT_DOUBLE_EQ(*SpeedPerGpu(job, "t4", cfg), 320 / 1.5);  // not in the table: 1
  // Measured on a100 too: the measurement wins over the table.
  job.type_speed["a100"] = 500;
  EXPECT_DOUBLE_EQ(*SpeedPerGpu(job, "a100", cfg), 500);
  EXPECT_EQ(OtherTypes(job), std::vector<std::string>{"a100"});
  // Measured nowhere: unknown.
  ElasticJob fresh = V100Job();
  fresh.samples.clear();
  EXPECT_FALSE(SpeedPerGpu(fresh, "a100", cfg).has_value());
}

TEST(TypeMovesTest, AMoveMustSavePaybackTimesItsCost) {
  ElasticJob job = V100Job();
  job.samples = {{1, 2, 32, 0.1}};  // the last step: 640 samples/s at 2 GPUs
  ControllerConfig cfg;
  cfg.type_speed = {{"a100", 2.0}};
  const double now = 1000;
  auto c = CheckMove(job, "a100", 60, 2, cfg, now);
  ASSERT_TRUE(c.has_value());
  EXPECT_NEAR(c->left_s, 600, 1e-6);
  EXPECT_NEAR(c->left_new_s, 300, 1e-6);
  EXPECT_TRUE(c->worth);  // saves 300 s > 2 x 60 s
  EXPECT_FALSE(CheckMove(job, "a100", 150, 2, cfg, now)->worth);  // 300 s is not > 2 x 150 s
  EXPECT_EQ(CheckMove(job, "a100", 150, 2, cfg, now)->ToJson()["saved_s"], 300.0);
  job.total_samples = 0;  // no training goal: no move
  EXPECT_FALSE(CheckMove(job, "a100", 60, 2, cfg, now).has_value());
}

TEST(TypeMovesTest, SamplesAndFitArePerType) {
  ElasticJob job = V100Job();
  job.fit = optimizer::PolluxParams{};
  const auto v100_samples = job.samples;
  SwitchTypeSamples(job, "v100", "a100");
  EXPECT_TRUE(job.samples.empty());  // nothing measured on a100 yet
  EXPECT_FALSE(job.fit.has_value());
  EXPECT_DOUBLE_EQ(job.type_speed.at("v100"), 320);
  job.samples = {{1, 2, 32, 0.05}};
  job.gpu_type = "a100";
  SwitchTypeSamples(job, "a100", "v100");  // back: v100's samples return, a100's are kept
  EXPECT_EQ(job.samples.size(), v100_samples.size());
  EXPECT_DOUBLE_EQ(job.type_speed.at("a100"), 640);
  ASSERT_EQ(job.samples_by_type.count("a100"), 1u);
  EXPECT_EQ(job.samples_by_type.count("v100"), 0u);
}

TEST(TypeMovesTest, TheRecordKeepsSpeedsSamplesAndTheMove) {
  ElasticJob job = V100Job();
  SwitchTypeSamples(job, "v100", "a100");
  job.move = {{"from", "v100"}, {"to", "a100"}, {"phase", "released"}, {"started_at", 12.5}};
  ElasticJob back = ElasticJob::FromJson(job.ToJson());
  EXPECT_EQ(back.type_speed, job.type_speed);
  ASSERT_EQ(back.samples_by_type.at("v100").size(), 3u);
  EXPECT_DOUBLE_EQ(back.samples_by_type.at("v100")[2].step_time, 0.5);
  EXPECT_EQ(back.move, job.move);
  // An old record (none of these keys) reads as a job that never moved.
  ElasticJob old = ElasticJob::FromJson({{"id", 1}, {"uid", 2}});
  EXPECT_TRUE(old.type_speed.empty() && old.samples_by_type.empty() && old.move.is_null());
}

TEST(TypeMovesTest, AMovedJobIsKeptFromTheNodesWithoutItsNewType) {
  NodeInfo a1, v1, mixed;
  a1.name = "n1";
  a1.gpu_type = "a100";
  a1.gpus = 4;
  v1.name = "n3";
  v1.gpu_type = "v100";
  v1.gpus = 4;
  mixed.name = "m1";
  mixed.gpu_type = "mixed";
  mixed.by_type = {{"a100", 2, 0}, {"v100", 2, 0}};
  EXPECT_EQ(NodesWithout({a1, v1, mixed}, "a100"), "n3");
  EXPECT_EQ(NodesWithout({a1, v1, mixed}, "v100"), "n1");
}

// One elastic job at 2 GPUs (no growth) on a node of one type that accepts both of the cluster's
// types (--elastic-gpu-types), with an untyped GPU request; the other type's node is free.
RecordedSnapshot TwoTypesOneJob(int64_t samples_left) {
  RecordedSnapshot snap = GenerateSnapshot(2, 4, 2, 1, 0, 3);
  EXPECT_EQ(snap.registry.size(), 1u);
  auto& job = snap.registry[0];
  job["base_gpus"] = 2;
  job["spec"]["gpus_min"] = 2;
  job["spec"]["gpus_max"] = 2;
  job["spec"]["gpu_types"] = "t0,t1";
  job["samples"] = nlohmann::json::array({{1, 2, 32, 0.1}, {1, 2, 32, 0.1}});  // 320 samples/s per GPU
  job["total_samples"] = 1000000;
  job["samples_done"] = 1000000 - samples_left;
  snap.jobs[0].gpus = 2;
  snap.jobs[0].request_type = "";
  for (auto& n : snap.nodes) n.gpus_used = n.gpu_type == job["gpu_type"].get<std::string>() ? 2 : 0;
  return snap;
}

TEST(TypeMoveEpochTest, AJobMovesToAFasterTypeItAcceptsWhenThatPaysBack) {
  ControllerConfig cfg;
  RecordedSnapshot snap = TwoTypesOneJob(640 * 600);  // 10 minutes left at 640 samples/s
  const std::string here = snap.registry[0]["gpu_type"], there = here == "t0" ? "t1" : "t0";
  cfg.type_speed = {{there, 2.0}};  // the site's table: twice as fast per GPU
  cfg.move_cost_s = 60;
  cfg.move_payback = 2;
  auto decide = [&](const RecordedSnapshot& s, const ControllerConfig& c) {
    EpochResult r = MakeController(s, c)->Epoch(s.nodes, s.jobs, true);
    EXPECT_EQ(r.plan["decisions"].size(), 1u) << r.plan.dump();
    return r.plan["decisions"][0];
  };
  nlohmann::json d = decide(snap, cfg);
  ASSERT_EQ(d["action"], "move") << d.dump();
  EXPECT_EQ(d["move_to"], there);
  EXPECT_NEAR(d["move_check"]["left_s"].get<double>(), 600, 1);
  EXPECT_NEAR(d["move_check"]["left_new_s"].get<double>(), 300, 1);  // 2 x the speed on its 2 GPUs
  EXPECT_TRUE(d["move_check"]["worth"].get<bool>());

  // Saving 300 s does not pay back a move that costs 200 s twice over: the plan keeps the job
  // where it is, and the decision says why.
  ControllerConfig dear = cfg;
  dear.move_cost_s = 200;
  d = decide(snap, dear);
  EXPECT_EQ(d["action"], "stay") << d.dump();
  EXPECT_FALSE(d.contains("move_to")) << d.dump();
  EXPECT_FALSE(d["move_checks"][there]["worth"].get<bool>()) << d.dump();
  EXPECT_NEAR(d["move_checks"][there]["saved_s"].get<double>(), 300, 1);
  // Neither does a job with little left.
  d = decide(TwoTypesOneJob(640 * 60), cfg);
  EXPECT_EQ(d["action"], "stay") << d.dump();
  EXPECT_FALSE(d.contains("move_to")) << d.dump();
  // Without the site's table the other type counts as fast as this one: no option there is better.
  d = decide(snap, ControllerConfig{});
  EXPECT_EQ(d["action"], "stay") << d.dump();
  EXPECT_FALSE(d.contains("move_to")) << d.dump();
  // A typed request (--gres=gpu:t0:2) cannot be moved on Slurm 22.05; nor any job with types.moves = 0.
  RecordedSnapshot typed = snap;
  typed.jobs[0].request_type = here;
  EXPECT_FALSE(decide(typed, cfg).contains("move_to"));
  ControllerConfig off = cfg;
  off.type_moves = false;
  EXPECT_FALSE(decide(snap, off).contains("move_to"));
  // The other type's GPUs are taken by a rigid job: the plan keeps the job where it is.
  RecordedSnapshot busy = snap;
  for (auto& n : busy.nodes) {
    if (n.gpu_type == there) n.gpus_used = 4;
  }
  JobInfo rigid;
  rigid.id = 88888;
  rigid.state = SlurmJobState::kRunning;
  rigid.gpus = 4;
  rigid.gpu_type = there;
  busy.jobs.push_back(rigid);
  EXPECT_FALSE(decide(busy, cfg).contains("move_to")) << decide(busy, cfg).dump();
}

TEST(TypeMoveEpochTest, AMoveStartsWithACheckpointCommandAndBacksOffWhenItFails) {
  // The epoch that decides a move queues a checkpoint command; the runtime acknowledges it as
  // failed: the move is given up (audit move_failed) and the job is not moved again at once.
  ControllerConfig cfg;
  RecordedSnapshot snap = TwoTypesOneJob(640 * 600);
  const std::string here = snap.registry[0]["gpu_type"], there = here == "t0" ? "t1" : "t0";
  cfg.type_speed = {{there, 2.0}};
  cfg.move_cost_s = 60;
  auto ctl = MakeController(snap, cfg);
  const uint32_t id = snap.registry[0]["id"];
  const uid_t owner = snap.registry[0]["uid"].get<uid_t>();
  EpochResult r = ctl->Epoch(snap.nodes, snap.jobs, /*dry_run=*/false);
  ASSERT_EQ(r.plan["decisions"][0]["action"], "move") << r.plan.dump();
  nlohmann::json status = ctl->Handle(owner, {{"v", 1}, {"type", "status"}, {"id", 1}});
  ASSERT_EQ(status["moves"].size(), 1u) << status.dump();
  EXPECT_EQ(status["moves"][0]["phase"], "checkpoint");
  EXPECT_EQ(status["moves"][0]["to"], there);
  EXPECT_FALSE(status["moves"][0].contains("uid"));
  // While the move is in flight the job makes no other change.
  r = ctl->Epoch(snap.nodes, snap.jobs, false);
  EXPECT_EQ(r.plan["decisions"][0]["action"], "move");
  nlohmann::json poll = ctl->Handle(owner, {{"v", 1}, {"type", "poll"}, {"id", 2}, {"job", id}, {"wait_ms", 0}});
  ASSERT_EQ(poll["commands"].size(), 1u) << poll.dump();
  EXPECT_EQ(poll["commands"][0]["action"], "checkpoint");
  EXPECT_EQ(poll["commands"][0]["reason"], "move to GPU type " + there);
  nlohmann::json ack = ctl->Handle(owner, {{"v", 1}, {"type", "ack"}, {"id", 3}, {"job", id},
                                           {"command", poll["commands"][0]["command"]}, {"ok", false},
                                           {"error", "no checkpoint directory"}});
  ASSERT_TRUE(ack.value("ok", false)) << ack.dump();
  status = ctl->Handle(owner, {{"v", 1}, {"type", "status"}, {"id", 4}});
  EXPECT_TRUE(status["moves"].empty()) << status.dump();
  r = ctl->Epoch(snap.nodes, snap.jobs, false);
  EXPECT_FALSE(r.plan["decisions"][0].contains("move_to")) << "moved again at once: " << r.plan.dump();
}

TEST(TypeMoveEpochTest, ARestartedElasticdKnowsTheMovesInFlight) {
  // A job elasticd requeued for a move (state 'moving' in the database) is listed as a move after
  // a restart, not as a running job.
  auto db = Database::Open(":memory:");
  ASSERT_TRUE(db.ok());
  ElasticJob job;
  job.id = 5;
  job.uid = 1000;
  job.gpu_type = "v100";
  job.base_gpus = 2;
  job.state = "moving";
  job.move = {{"from", "v100"}, {"to", "a100"}, {"phase", "released"}, {"started_at", 10.0}};
  records::SaveJob(*db.value(), job, 20.0);
  Controller ctl(ControllerConfig{}, std::move(db).value(), nullptr);
  nlohmann::json status = ctl.Handle(1000, {{"v", 1}, {"type", "status"}, {"id", 1}});
  ASSERT_EQ(status["moves"].size(), 1u) << status.dump();
  EXPECT_EQ(status["moves"][0]["job_id"], 5);
  EXPECT_EQ(status["moves"][0]["phase"], "released");
  EXPECT_TRUE(status["jobs"].empty());
  // Without Slurm, PrivateData counts as including jobs: another user does not see the move.
  nlohmann::json other = ctl.Handle(2000, {{"v", 1}, {"type", "status"}, {"id", 2}});
  EXPECT_TRUE(other.contains("only_own_jobs")) << other.dump();
  EXPECT_TRUE(other["moves"].empty()) << other.dump();
}

}  // namespace
}  // namespace elastic::controller
