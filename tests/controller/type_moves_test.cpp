// Jobs across GPU types (controller/src/type_moves.h): a job's speed per type, measured or from the
// site's table; the move rule; the samples kept per type; and the record that carries them.
#include <gtest/gtest.h>

#include "type_moves.h"

namespace elastic::controller {
namespace {

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

}  // namespace
}  // namespace elastic::controller
