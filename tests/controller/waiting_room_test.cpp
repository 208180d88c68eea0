// Room for a waiting job's shape (G GPUs on each of N nodes): which nodes, which extensions must
// leave (ChooseRoom), and an epoch that grows a job without taking the GPUs such a job needs on
// the node chosen for it. The extension that leaves for it: controller_leave_test.cpp.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "controller.h"
#include "db.h"
#include "snapshot.h"
#include "waiting_room.h"

namespace elastic::controller {
namespace {

TEST(ChooseRoomTest, AJobThatFitsTakesTheTightestNodesAndReleasesNothing) {
  const std::vector<NodeRoom> rooms{{"n1", 4, {}}, {"n2", 2, {{7, 2}}}, {"n3", 3, {}}, {"n4", 1, {}}};
  const auto c = ChooseRoom(2, 2, rooms);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->nodes, (std::vector<std::string>{"n2", "n3"}));  // n1's 4 stay whole for others
  EXPECT_TRUE(c->release.empty());
  EXPECT_EQ(c->released_gpus, 0);
}

TEST(ChooseRoomTest, TheFewestGpusAreReleasedOnTheCheapestNodes) {
  // 1 node x 4: n1 needs 3 more (its groups of 2 and 1 are the only way: 3), n2 needs 2 (its
  // group of 2 beats its group of 3; the group of 2 listed second), n3 cannot (its rest is held
  // by jobs elasticd does not shrink).
  const std::vector<NodeRoom> rooms{{"n1", 1, {{11, 2}, {12, 1}}}, {"n2", 2, {{21, 3}, {22, 2}}}, {"n3", 1, {{31, 1}}}};
  const auto c = ChooseRoom(1, 4, rooms);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->nodes, std::vector<std::string>{"n2"});
  EXPECT_EQ(c->release, std::vector<int64_t>{22});
  EXPECT_EQ(c->released_gpus, 2);
  // 2 nodes x 4: n2 (2 GPUs released) and n1 (3); n3 is never enough.
  const auto two = ChooseRoom(2, 4, rooms);
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(two->nodes, (std::vector<std::string>{"n2", "n1"}));
  EXPECT_EQ(two->release, (std::vector<int64_t>{22, 11, 12}));
  EXPECT_EQ(two->released_gpus, 5);
  // Fewer GPUs first, then fewer extensions: a deficit of 2 with groups 1, 1, 2 takes the 2.
  const auto one = ChooseRoom(1, 2, {{"n1", 0, {{1, 1}, {2, 1}, {3, 2}}}});
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->release, std::vector<int64_t>{3});
}

TEST(ChooseRoomTest, NoRoomWhenReleasingEverythingWouldNotDo) {
  const std::vector<NodeRoom> rooms{{"n1", 1, {{1, 2}}}, {"n2", 4, {}}};
  EXPECT_FALSE(ChooseRoom(2, 4, rooms).has_value());  // n1 reaches 3 at most
  EXPECT_FALSE(ChooseRoom(3, 1, rooms).has_value());  // two nodes only
  EXPECT_FALSE(ChooseRoom(1, 0, rooms).has_value());  // no shape
  ASSERT_TRUE(ChooseRoom(1, 4, rooms).has_value());
  EXPECT_EQ(ChooseRoom(1, 4, rooms)->nodes, std::vector<std::string>{"n2"});
}

TEST(ChooseRoomTest, ManyExtensionsOnANodeStillCoverTheDeficit) {
  NodeRoom big{"n1", 0, {}};
  for (int64_t id = 1; id <= 20; ++id) big.releasable.push_back({id, id % 2 == 0 ? 2 : 1});  // past the exact search
  const auto c = ChooseRoom(1, 7, {big});
  ASSERT_TRUE(c.has_value());
  EXPECT_GE(c->released_gpus, 7);
  EXPECT_LE(c->released_gpus, 8);
}

// Three nodes of 4 GPUs: elastic job A at 2 GPUs on n1 (up to 8, any node), a rigid job of 2 on n2,
// one of 3 on n3: 2 + 2 + 1 GPUs free. A rigid job waits for 2 GPUs on one node, so the plan
// gives A 3 more. Growing onto the nodes with the most free GPUs first would take n1's 2 and one
// of n2's, and leave no node with 2 free; the room made for the waiting job keeps n1's 2 for it.
TEST(WaitingRoomEpochTest, GrowthLeavesTheWaitingJobItsNode) {
  RecordedSnapshot snap = GenerateSnapshot(3, 4, 1, 1, 0, 3);
  ASSERT_EQ(snap.registry.size(), 1u);
  snap.registry[0]["base_gpus"] = 2;
  snap.registry[0]["spec"]["gpus_min"] = 2;
  snap.registry[0]["spec"]["gpus_max"] = 8;
  snap.jobs[0].gpus = 2;
  snap.jobs[0].nodes = snap.nodes[0].name;
  snap.jobs[0].node_names = {snap.nodes[0].name};
  const std::string type = snap.nodes[0].gpu_type;
  for (auto [k, gpus] : {std::pair{0, 2}, std::pair{1, 2}, std::pair{2, 3}}) snap.nodes[static_cast<size_t>(k)].gpus_used = gpus;
  for (auto [k, gpus] : {std::pair{1, 2}, std::pair{2, 3}}) {
    JobInfo rigid;
    rigid.id = static_cast<uint32_t>(5000 + k);
    rigid.state = SlurmJobState::kRunning;
    rigid.gpus = gpus;
    rigid.gpu_type = type;
    rigid.nodes = snap.nodes[static_cast<size_t>(k)].name;
    rigid.node_names = {rigid.nodes};
    snap.jobs.push_back(rigid);
  }
  JobInfo waiting;
  waiting.id = 99999;
  waiting.state = SlurmJobState::kPending;
  waiting.waits_for_resources = true;
  waiting.gpus = 2;
  waiting.gpus_per_node = 2;
  waiting.nodes_min = 1;
  waiting.gpu_type = type;
  snap.jobs.push_back(waiting);

  auto db = Database::Open(":memory:");
  ASSERT_TRUE(db.ok());
  SeedRegistry(*db.value(), snap.registry);
  ControllerConfig cfg;
  cfg.min_rescale_interval_s = 0;
  cfg.fit_budget_ms = 600000;  // every model fitted in the first epoch, however slow the build
  Controller ctl(cfg, std::move(db).value(), nullptr);
  const EpochResult r = ctl.Epoch(snap.nodes, snap.jobs, /*dry_run=*/true);
  ASSERT_EQ(r.plan["room"].size(), 1u) << r.plan.dump();
  EXPECT_EQ(r.plan["room"][0]["action"], "fits") << r.plan["room"].dump();
  EXPECT_EQ(r.plan["room"][0]["on"], nlohmann::json::array({snap.nodes[0].name})) << r.plan["room"].dump();
  ASSERT_EQ(r.plan["decisions"].size(), 1u) << r.plan.dump();
  const nlohmann::json& d = r.plan["decisions"][0];
  ASSERT_EQ(d["action"], "grow") << d.dump();
  EXPECT_EQ(d["target"], 5) << "all the free GPUs but the waiting job's 2: " << d.dump();
  std::set<std::string> onto;
  for (const auto& g : d["groups"]) onto.insert(g["node"].get<std::string>());
  EXPECT_EQ(onto, (std::set<std::string>{snap.nodes[1].name, snap.nodes[2].name})) << d.dump();
}

}  // namespace
}  // namespace elastic::controller
