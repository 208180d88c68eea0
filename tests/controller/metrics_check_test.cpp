// The plausibility of a job's metrics (controller/src/metrics_check.h): each rule refuses or
// clamps what it should and lets an honest message through untouched; and through elasticd's
// handler, a refused step time never reaches the job's model and the reply names it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "controller.h"
#include "db.h"
#include "db_records.h"
#include "metrics_check.h"

namespace elastic::controller {
namespace {

constexpr double kNow = 1.7e9;

// What the runtime of a job at 4 GPUs, batch 256 sends.
MetricsReport Honest() {
  MetricsReport m;
  m.gpus = 4;
  m.global_batch = 256;
  m.local_batch = 64;
  m.step_time_s = 0.2;
  m.grad_sqr = 0.01;
  m.grad_var = 2.0;
  m.lr_factor = 1.0;
  m.samples = 100000;
  return m;
}

// A job at 4 GPUs (base 2 + a joined extension of 2), batch bounds 64-1024, batch 256 set.
MetricsExpectation Expect() {
  MetricsExpectation x;
  x.job = 4711;
  x.gpus_min = x.gpus_max = 4;
  x.batch_min = 64;
  x.batch_max = 1024;
  x.batches = {256};
  x.now = kNow;
  return x;
}

std::vector<std::string> Rules(const std::vector<MetricsFinding>& findings) {
  std::vector<std::string> out;
  for (const auto& f : findings) out.emplace_back(MetricsRuleName(f.rule));
  return out;
}

TEST(MetricsCheckTest, AnHonestMessagePassesUntouched) {
  const MetricsVerdict v = CheckMetrics(Honest(), Expect());
  EXPECT_TRUE(v.refused.empty()) << v.ReplyJson().dump();
  EXPECT_TRUE(v.clamped.empty()) << v.ReplyJson().dump();
  ASSERT_TRUE(v.step);
  EXPECT_EQ(v.step->gpus, 4);
  EXPECT_EQ(v.step->local_batch, 64);
  EXPECT_EQ(v.step->step_time_s, 0.2);
  EXPECT_EQ(v.batch, 256);
  EXPECT_TRUE(v.grad_stats_ok);
  EXPECT_EQ(v.lr_factor, 1.0);
  EXPECT_EQ(v.ReplyJson(), nlohmann::json::object());
  // Uneven shares: rank 0 may hold one sample more or less than the mean.
  MetricsReport m = Honest();
  m.global_batch = 258;
  m.local_batch = 65;
  MetricsExpectation x = Expect();
  x.batches = {};  // no batch known yet: any within the bounds
  EXPECT_TRUE(CheckMetrics(m, x).refused.empty());
}

TEST(MetricsCheckTest, ImplausibleValuesAreRefused) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  struct Case {
    const char* name;
    void (*change)(MetricsReport&);
    const char* rule;
    bool step_used;  // the step-time sample still counts
  };
  const std::vector<Case> cases{
      {"negative step time", [](MetricsReport& m) { m.step_time_s = -0.2; }, "step_time", false},
      {"zero step time", [](MetricsReport& m) { m.step_time_s = 0.0; }, "step_time", false},
      {"step time below the floor", [](MetricsReport& m) { m.step_time_s = 1e-6; }, "step_time", false},
      {"step time above the ceiling", [](MetricsReport& m) { m.step_time_s = 7200; }, "step_time", false},
      {"GPUs Slurm did not allocate", [](MetricsReport& m) { m.gpus = 16; }, "gpus", false},
      {"fractional GPUs", [](MetricsReport& m) { m.gpus = 3.5; }, "gpus", false},
      {"batch above the bounds", [](MetricsReport& m) {
         m.global_batch = 4096;
         m.local_batch = 1024;
       }, "batch_range", false},
      {"batch elasticd did not set", [](MetricsReport& m) {
         m.global_batch = 512;
         m.local_batch = 128;
       }, "batch", false},
      {"local batch not the share of the global one", [](MetricsReport& m) { m.local_batch = 256; }, "local_batch",
       false},
      {"fractional local batch", [](MetricsReport& m) { m.local_batch = 64.5; }, "local_batch", false},
      {"negative gradient norm", [](MetricsReport& m) { m.grad_sqr = -1.0; }, "grad_stats", true},
      {"negative gradient variance", [](MetricsReport& m) { m.grad_var = -2.0; }, "grad_stats", true},
      {"zero learning-rate factor", [](MetricsReport& m) { m.lr_factor = 0.0; }, "lr_factor", true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    MetricsReport m = Honest();
    c.change(m);
    const MetricsVerdict v = CheckMetrics(m, Expect());
    EXPECT_EQ(Rules(v.refused), std::vector<std::string>{c.rule}) << v.ReplyJson().dump();
    EXPECT_EQ(v.step.has_value(), c.step_used);
    const nlohmann::json reply = v.ReplyJson();
    ASSERT_EQ(reply["refused"].size(), 1u);
    EXPECT_EQ(reply["refused"][0]["rule"], c.rule);
    EXPECT_FALSE(reply["refused"][0]["message"].get<std::string>().empty());
  }
  // Values JSON cannot carry but a parser may produce (1e999 reads as infinity).
  for (double bad : {nan, inf, -inf}) {
    MetricsReport m = Honest();
    m.step_time_s = bad;
    m.grad_var = bad;
    const MetricsVerdict v = CheckMetrics(m, Expect());
    EXPECT_EQ(Rules(v.refused), (std::vector<std::string>{"step_time", "grad_stats"})) << bad;
    EXPECT_FALSE(v.step);
    EXPECT_FALSE(v.grad_stats_ok);
  }
  // The message names what was wrong and the allocation.
  MetricsReport m = Honest();
  m.gpus = 16;
  EXPECT_EQ(CheckMetrics(m, Expect()).refused.at(0).message,
            "gpus 16 is not what Slurm allocated to job 4711 and its extensions (4); its step time is not used");
}

TEST(MetricsCheckTest, RescalesInFlightAndCommandedBatches) {
  MetricsExpectation x = Expect();
  x.gpus_min = 4;
  x.gpus_max = 6;  // a group of 2 joining
  x.batches = {256, 384};  // a grow command carries 384
  MetricsReport m = Honest();
  m.gpus = 6;
  m.global_batch = 384;
  m.local_batch = 64;
  const MetricsVerdict v = CheckMetrics(m, x);
  EXPECT_TRUE(v.refused.empty()) << v.ReplyJson().dump();
  EXPECT_EQ(v.batch, 384);
  m.gpus = 8;
  m.local_batch = 48;
  EXPECT_EQ(CheckMetrics(m, x).refused.at(0).message,
            "gpus 8 is not what Slurm allocated to job 4711 and its extensions (4 to 6 while a rescale is in "
            "flight); its step time is not used");
}

TEST(MetricsCheckTest, AStepFasterThanTheProgressIsClamped) {
  // 10 s ago the job had trained 100000 samples; now 110000: 1000 samples/s. A step of 0.2 s at
  // batch 256 claims 1280 samples/s: within the slack, kept. A step of 0.05 s claims 5120: clamped
  // to what the progress shows, 0.256 s.
  MetricsExpectation x = Expect();
  x.previous = ProgressMark{kNow - 10, 100000, 4, 256};
  MetricsReport m = Honest();
  m.samples = 110000;
  MetricsVerdict v = CheckMetrics(m, x);
  EXPECT_TRUE(v.clamped.empty());
  EXPECT_EQ(v.step->step_time_s, 0.2);
  ASSERT_TRUE(v.mark);
  EXPECT_EQ(v.mark->samples, 110000);
  m.step_time_s = 0.05;
  v = CheckMetrics(m, x);
  EXPECT_TRUE(v.refused.empty());
  EXPECT_EQ(Rules(v.clamped), std::vector<std::string>{"progress"});
  ASSERT_TRUE(v.step);
  EXPECT_NEAR(v.step->step_time_s, 0.256, 1e-12);
  EXPECT_NEAR(v.ReplyJson()["clamped"][0]["used"].get<double>(), 0.256, 1e-12);
  // No comparison across a change of size or batch, over less than kMinProgressWindowS, or when
  // the count went back (a restarted program).
  for (auto change : {+[](MetricsExpectation& e) { e.previous->gpus = 2; },
                      +[](MetricsExpectation& e) { e.previous->batch = 128; },
                      +[](MetricsExpectation& e) { e.previous->at = kNow - 1; },
                      +[](MetricsExpectation& e) { e.previous->samples = 200000; }}) {
    MetricsExpectation y = x;
    change(y);
    EXPECT_TRUE(CheckMetrics(m, y).clamped.empty());
  }
}

// Through elasticd's handler: refused parts do not reach the job, the rest of the message does.
TEST(MetricsCheckTest, TheHandlerKeepsRefusedValuesFromTheModel) {
  auto db = Database::Open(":memory:");
  ASSERT_TRUE(db.ok());
  ElasticJob job;
  job.id = 4711;
  job.uid = 1001;
  job.user = "alice";
  job.gpu_type = "a100";
  job.base_gpus = 2;
  job.spec = {{"gpus_min", 2}, {"gpus_max", 8}, {"batch_min", 64}, {"batch_max", 1024}};
  records::SeedRunningJob(*db.value(), job.ToJson());
  const int64_t command = records::QueueCommand(*db.value(), 4711, {{"action", "set_batch"}, {"global_batch", 256}}, kNow);
  Controller ctl(ControllerConfig{}, std::move(db).value(), nullptr);
  auto send = [&](nlohmann::json fields) {
    fields.update({{"v", 1}, {"type", "metrics"}, {"id", 1}, {"job", 4711u}});
    nlohmann::json reply = ctl.Handle(1001, fields);
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
    return reply;
  };
  auto stored = [&] { return ctl.RegistryJson()[0]; };
  nlohmann::json reply = send({{"gpus", 2}, {"global_batch", 128}, {"local_batch", 64}, {"step_time_s", 0.1},
                               {"samples", 1280}, {"grad_sqr", 0.01}, {"grad_var", 2.0}});
  EXPECT_FALSE(reply.contains("refused")) << reply.dump();
  EXPECT_EQ(stored()["samples"].size(), 1u);
  EXPECT_EQ(stored()["batch"], 128);
  // Claims 8 GPUs (Slurm allocated 2) and another batch than the one it reported: refused, and
  // the job's batch and samples stay; its progress counts.
  reply = send({{"gpus", 8}, {"global_batch", 512}, {"local_batch", 64}, {"step_time_s", 0.1}, {"samples", 2560}});
  ASSERT_EQ(reply["refused"].size(), 2u) << reply.dump();
  EXPECT_EQ(reply["refused"][0]["field"], "gpus");
  EXPECT_EQ(reply["refused"][1]["field"], "global_batch");
  EXPECT_EQ(stored()["samples"].size(), 1u);
  EXPECT_EQ(stored()["batch"], 128);
  EXPECT_EQ(stored()["samples_done"], 2560);
  EXPECT_EQ(stored()["metrics_received"], 2);
  // The batch of a command not yet acknowledged is expected too; an ack's batch that is neither
  // the command's nor the job's is not taken.
  reply = send({{"gpus", 2}, {"global_batch", 256}, {"local_batch", 128}, {"step_time_s", 0.15}});
  EXPECT_FALSE(reply.contains("refused")) << reply.dump();
  EXPECT_EQ(stored()["batch"], 256);
  nlohmann::json ack = ctl.Handle(1001, {{"v", 1}, {"type", "ack"}, {"id", 3}, {"job", 4711u}, {"command", command},
                                         {"ok", true}, {"global_batch", 999}});
  EXPECT_TRUE(ack.value("ok", false)) << ack.dump();
  EXPECT_EQ(stored()["batch"], 256);
  // Negative gradient statistics leave the measured ones in place.
  reply = send({{"grad_sqr", -5.0}, {"grad_var", 2.0}});
  EXPECT_EQ(reply["refused"][0]["rule"], "grad_stats");
  EXPECT_NEAR(stored()["efficiency"][1].get<double>(), 0.01, 1e-12);
  // A field that is not a number is a protocol error, as before.
  nlohmann::json bad = ctl.Handle(1001, {{"v", 1}, {"type", "metrics"}, {"id", 2}, {"job", 4711u}, {"gpus", "two"}});
  EXPECT_EQ(bad["error"]["kind"], "protocol") << bad.dump();
}

}  // namespace
}  // namespace elastic::controller
