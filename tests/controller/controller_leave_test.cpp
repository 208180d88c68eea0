// Extensions leaving their job (no Slurm; the epoch is driven on a recorded view of it): a
// drained node's extension leaves first whatever its age, so a drain takes one shrink; the
// extension on the node a waiting job needs leaves, not the latest; and a leave the job never
// carries out ends at extensions.leave_timeout, in the epoch that passes it and after a restart
// of elasticd alike.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <tuple>

#include "controller.h"
#include "db.h"
#include "running_extension.h"
#include "snapshot.h"
#include "state_file.h"
#include "waiting_job.h"

namespace elastic::controller {
namespace {

// Two nodes of 4 GPUs. Job A (base 2 on n1, up to 6 GPUs) with two joined extensions of 2 GPUs:
// group 1 on n2, joined first, and group 2 on n1, joined 10 s later; job B (2 GPUs, fixed) on
// n2. The extensions' Slurm jobs (90001, 90002) run. The state database is a file, so that the
// test can read what elasticd wrote while the controller has it open.
class LeaveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    snap_ = GenerateSnapshot(2, 4, 1, 2, 0, 3);
    ASSERT_EQ(snap_.registry.size(), 2u);
    snap_.registry[1]["samples"] = snap_.registry[0]["samples"];
    snap_.registry[1]["efficiency"] = snap_.registry[0]["efficiency"];
    for (int k : {0, 1}) {
      snap_.registry[k]["base_gpus"] = 2;
      snap_.registry[k]["spec"]["gpus_min"] = 2;
      snap_.registry[k]["spec"]["gpus_max"] = k == 0 ? 6 : 2;
      snap_.jobs[static_cast<size_t>(k)].gpus = 2;
      snap_.jobs[static_cast<size_t>(k)].nodes = snap_.nodes[static_cast<size_t>(k)].name;
      snap_.nodes[static_cast<size_t>(k)].gpus_used = 4;
    }
    parent_ = snap_.registry[0]["id"].get<uint32_t>();
    owner_ = snap_.registry[0]["uid"].get<uid_t>();
    for (int group : {1, 2}) {
      const std::string& node = group == 1 ? snap_.nodes[1].name : snap_.nodes[0].name;
      snap_.jobs.push_back(
          RunningExtensionJob(static_cast<uint32_t>(90000 + group), owner_, node, snap_.nodes[0].gpu_type, 2));
    }
  }

  // Seeds the database: the jobs, and the extensions in `state` (group 1 in `state1`), each with
  // the shrink requested `shrink_age_s` ago when it is leaving.
  void Seed(const std::string& state1, const std::string& state2, double shrink_age_s = 0) {
    auto db = Database::Open(path_);
    ASSERT_TRUE(db.ok());
    SeedRegistry(*db.value(), snap_.registry);
    const double t = Now() - 1000;
    for (auto [group, node, joined, state] : {std::tuple{1, snap_.nodes[1].name, t + 10, state1},
                                              std::tuple{2, snap_.nodes[0].name, t + 20, state2}}) {
      SeedExtension(*db.value(), parent_, group, static_cast<uint32_t>(90000 + group), node, snap_.nodes[0].gpu_type, 2,
                    state, t, joined);
      if (state == "leaving") {
        db.value()->Run("INSERT INTO rescales (job_id, kind, grp, from_gpus, to_gpus, requested_at) "
                        "VALUES (?, 'shrink', ?, 6, 4, ?)",
                        {int64_t{parent_}, int64_t{group}, Now() - shrink_age_s});
      }
    }
  }

  // Job B gone (n2 holds only group 1 of job A: 2 of its 4 GPUs free), both groups joined.
  void WithoutJobB() {
    snap_.registry.erase(1);
    snap_.jobs.erase(snap_.jobs.begin() + 1);
    snap_.nodes[1].gpus_used = 2;
    Seed("joined", "joined");
  }

  std::unique_ptr<Controller> Start(ControllerConfig cfg) { return state_.OpenController(cfg); }

  // Job A's decision in an enacted epoch.
  nlohmann::json Decision(Controller& ctl) {
    const EpochResult r = ctl.Epoch(snap_.nodes, snap_.jobs, /*dry_run=*/false);
    for (const auto& d : r.plan["decisions"]) {
      if (d["job"] == parent_) return d;
    }
    return nlohmann::json();
  }

  // Job A's extensions as status shows them: group -> state.
  std::map<int, std::string> Extensions(Controller& ctl) {
    std::map<int, std::string> out;
    const nlohmann::json status = ctl.Handle(owner_, {{"v", 1}, {"type", "status"}, {"id", 1}});
    for (const auto& j : status["jobs"]) {
      if (j["job_id"] != parent_) continue;
      for (const auto& e : j["extensions"]) out[e["group"].get<int>()] = e["state"].get<std::string>();
    }
    return out;
  }

  // One column of the rows a query selects, as text, joined by ",".
  std::string Query(const std::string& sql) {
    auto db = Database::Open(path_);
    EXPECT_TRUE(db.ok());
    std::string out;
    db.value()->Run(sql, {}, [&](sqlite3_stmt* st) { out += (out.empty() ? "" : ",") + Database::Text(st, 0); });
    return out;
  }

  StateFile state_;
  const std::string& path_ = state_.path();
  RecordedSnapshot snap_;
  uint32_t parent_ = 0;
  uid_t owner_ = 0;
};

TEST_F(LeaveTest, ADrainedNodeUnderAnOlderExtensionEmptiesInOneShrink) {
  // n2 drains: group 1 on it is the older extension. A rigid job waits for 2 GPUs, so the plan
  // takes job A from 6 GPUs to 4. Group 1 leaves first and its GPUs count toward that target: it
  // alone leaves, by one shrink command, and the latest group (2, on n1) stays.
  Seed("joined", "joined");
  snap_.nodes[1].draining = true;
  snap_.jobs.push_back(WaitingJob(99999, 2, snap_.nodes[0].gpu_type));
  auto ctl = Start({});
  nlohmann::json d = Decision(*ctl);
  snap_.jobs.pop_back();  // the waiting job starts elsewhere
  ASSERT_EQ(d["action"], "shrink") << d.dump();
  EXPECT_EQ(d["target"], 4) << d.dump();
  ASSERT_EQ(d["groups"].size(), 1u) << d.dump();
  EXPECT_EQ(d["groups"][0]["group"], 1) << d.dump();
  const nlohmann::json poll =
      ctl->Handle(owner_, {{"v", 1}, {"type", "poll"}, {"id", 2}, {"job", parent_}, {"wait_ms", 0}});
  ASSERT_EQ(poll.at("commands").size(), 1u) << poll.dump();
  const nlohmann::json cmd = poll.at("commands")[0];
  EXPECT_EQ(cmd["action"], "shrink");
  EXPECT_EQ(cmd["group"], 1);
  EXPECT_EQ(Extensions(*ctl), (std::map<int, std::string>{{1, "leaving"}, {2, "joined"}}));
  // The runtime lets group 1 leave: the drain is done, group 2 stays in the next epochs.
  const nlohmann::json ack = ctl->Handle(owner_, {{"v", 1}, {"type", "ack"}, {"id", 3}, {"job", parent_},
                                                  {"command", cmd["command"]}, {"ok", true}, {"gpus", 4}});
  ASSERT_TRUE(ack.value("ok", false)) << ack.dump();
  snap_.jobs.erase(snap_.jobs.end() - 2);  // Slurm ended extension job 90001
  EXPECT_EQ(Extensions(*ctl), (std::map<int, std::string>{{2, "joined"}}));
  for (int epoch = 0; epoch < 2; ++epoch) {
    nlohmann::json next = Decision(*ctl);
    EXPECT_NE(next["action"], "shrink") << next.dump();
  }
  EXPECT_EQ(Extensions(*ctl), (std::map<int, std::string>{{2, "joined"}}));
}

TEST_F(LeaveTest, AJobWaitingForAWholeNodeGetsTheNodeWhereAnExtensionLeaves) {
  // Job B is gone: n2 holds only job A's group 1 (2 of its 4 GPUs free). A rigid job waits for a
  // whole node (1 node x 4 GPUs). By GPU count the plan takes A from 6 to 4, and a shrink would
  // let the latest group (2, on n1, beside A's base) go: no node would then have 4 free, and the
  // job would wait while A stays at 4. Making room for its shape lets group 1 go instead: n2
  // empties, and A keeps group 2 (at 4, as the plan says).
  WithoutJobB();
  snap_.jobs.push_back(WaitingJob(99999, 4, snap_.nodes[0].gpu_type, 4, 1));
  auto ctl = Start({});
  const EpochResult r = ctl->Epoch(snap_.nodes, snap_.jobs, /*dry_run=*/false);
  ASSERT_EQ(r.plan["room"].size(), 1u) << r.plan.dump();
  const nlohmann::json& room = r.plan["room"][0];
  EXPECT_EQ(room["job"], 99999);
  EXPECT_EQ(room["action"], "release") << room.dump();
  EXPECT_EQ(room["on"], nlohmann::json::array({snap_.nodes[1].name})) << room.dump();
  ASSERT_EQ(room["released"].size(), 1u) << room.dump();
  EXPECT_EQ(room["released"][0]["group"], 1) << room.dump();
  ASSERT_EQ(r.plan["decisions"].size(), 1u) << r.plan.dump();
  const nlohmann::json& d = r.plan["decisions"][0];
  EXPECT_EQ(d["action"], "shrink") << d.dump();
  EXPECT_EQ(d["target"], 4) << d.dump();
  EXPECT_EQ(d["room_for"], nlohmann::json::array({99999})) << d.dump();
  const nlohmann::json poll =
      ctl->Handle(owner_, {{"v", 1}, {"type", "poll"}, {"id", 2}, {"job", parent_}, {"wait_ms", 0}});
  ASSERT_EQ(poll.at("commands").size(), 1u) << poll.dump();
  EXPECT_EQ(poll.at("commands")[0]["action"], "shrink");
  EXPECT_EQ(poll.at("commands")[0]["group"], 1);
  EXPECT_EQ(poll.at("commands")[0]["gpus"], 4);
  EXPECT_EQ(Extensions(*ctl), (std::map<int, std::string>{{1, "leaving"}, {2, "joined"}}));
  // The next epoch (group 1 still leaving) releases nothing more: its GPUs come free for the job.
  const EpochResult next = ctl->Epoch(snap_.nodes, snap_.jobs, /*dry_run=*/false);
  ASSERT_EQ(next.plan["room"].size(), 1u) << next.plan.dump();
  EXPECT_EQ(next.plan["room"][0]["action"], "fits") << next.plan["room"].dump();
  EXPECT_EQ(Extensions(*ctl), (std::map<int, std::string>{{1, "leaving"}, {2, "joined"}}));
}

TEST_F(LeaveTest, AJobWaitingForGpusAsAWholeTakesThePlansShrink) {
  // The same layout, the waiting job asking for its 4 GPUs as a whole (--gpus=4, not per node):
  // it can start on any nodes, so no room is made, and the plan's shrink (the latest group) serves.
  WithoutJobB();
  snap_.jobs.push_back(WaitingJob(99999, 4, snap_.nodes[0].gpu_type));
  auto ctl = Start({});
  const EpochResult r = ctl->Epoch(snap_.nodes, snap_.jobs, /*dry_run=*/false);
  EXPECT_TRUE(r.plan["room"].empty()) << r.plan.dump();
  EXPECT_EQ(Extensions(*ctl), (std::map<int, std::string>{{1, "joined"}, {2, "leaving"}}));
}

TEST_F(LeaveTest, ALeaveTheJobNeverCarriesOutEndsAtTheDeadline) {
  // The drain's shrink command is queued, but the job never reaches a rescale point (it never
  // acknowledges). Within extensions.leave_timeout (1 s here) group 1 stays leaving; after it,
  // the next epoch ends it: failed with the reason, an audit record, the command cancelled, the
  // rescale recorded as failed, and the job counted without its GPUs.
  Seed("joined", "joined");
  snap_.nodes[1].draining = true;
  ControllerConfig cfg;
  cfg.leave_timeout_s = 1;
  auto ctl = Start(cfg);
  ASSERT_EQ(Decision(*ctl)["action"], "shrink");
  const nlohmann::json poll =
      ctl->Handle(owner_, {{"v", 1}, {"type", "poll"}, {"id", 2}, {"job", parent_}, {"wait_ms", 0}});
  ASSERT_EQ(poll.at("commands").size(), 1u) << poll.dump();
  Decision(*ctl);
  EXPECT_EQ(Extensions(*ctl), (std::map<int, std::string>{{1, "leaving"}, {2, "joined"}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  Decision(*ctl);
  EXPECT_EQ(Extensions(*ctl), (std::map<int, std::string>{{2, "joined"}}));
  EXPECT_EQ(Query("SELECT state || ': ' || reason FROM extensions WHERE grp = 1"),
            "failed: did not leave within 1 s: the job reached no rescale point");
  EXPECT_EQ(Query("SELECT json_extract(detail, '$.group') || ' ' || json_extract(detail, '$.job') FROM audit "
                  "WHERE action = 'leave_timeout'"),
            "1 90001");
  EXPECT_EQ(Query("SELECT state FROM commands WHERE json_extract(body, '$.action') = 'shrink'"), "cancelled");
  EXPECT_EQ(Query("SELECT ok FROM rescales WHERE kind = 'shrink' AND grp = 1"), "0");
  const nlohmann::json status = ctl->Handle(owner_, {{"v", 1}, {"type", "status"}, {"id", 4}});
  for (const auto& j : status["jobs"]) {
    if (j["job_id"] == parent_) {
      EXPECT_EQ(j["gpus"], 4) << j.dump();
    }
  }
}

TEST_F(LeaveTest, TheDeadlineCountsFromTheShrinkRequestAcrossARestart) {
  // elasticd restarts while group 1 is leaving: the deadline counts from the shrink's request in
  // the rescales table, not from the restart. 400 s ago with the default 300 s: ended at once;
  // 100 s ago: not yet; 400 s ago with leave_timeout 0 (off): never.
  for (auto [age, timeout, ends] : {std::tuple{400.0, 300.0, true}, std::tuple{100.0, 300.0, false},
                                    std::tuple{400.0, 0.0, false}}) {
    state_.Renew();  // a fresh database and view for each case
    SetUp();
    Seed("leaving", "joined", age);
    ControllerConfig cfg;
    cfg.leave_timeout_s = timeout;
    auto ctl = Start(cfg);
    Decision(*ctl);
    const std::map<int, std::string> expected =
        ends ? std::map<int, std::string>{{2, "joined"}} : std::map<int, std::string>{{1, "leaving"}, {2, "joined"}};
    EXPECT_EQ(Extensions(*ctl), expected) << "shrink requested " << age << " s ago, leave_timeout " << timeout;
    EXPECT_EQ(Query("SELECT COUNT(*) FROM audit WHERE action = 'leave_timeout'"), ends ? "1" : "0");
  }
}

}  // namespace
}  // namespace elastic::controller
