// A job whose runtime can start ranks only on its leader's node (Open MPI 5's DVM: the launcher
// reports "grows_onto": "leader_node") is extended only there, and the plan does not give it more
// than that node holds; such a job on several nodes is not grown; a job that reports nothing
// grows onto any node; one that grows by relaunch takes its leader's node first, in place, and
// other nodes by relaunch.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "controller.h"
#include "db.h"
#include "snapshot.h"

namespace elastic::controller {
namespace {

// `nodes` nodes of 4 GPUs; one elastic job at 1 GPU on each node of `on` (up to gpus_max), the
// other nodes idle.
RecordedSnapshot OneJob(int nodes, const std::vector<int>& on, int gpus_max, const char* grows_onto) {
  RecordedSnapshot snap = GenerateSnapshot(nodes, 4, 1, 1, 0, 3);
  EXPECT_EQ(snap.registry.size(), 1u);
  const int gpus = static_cast<int>(on.size());
  snap.registry[0]["base_gpus"] = gpus;
  snap.registry[0]["spec"]["gpus_min"] = gpus;
  snap.registry[0]["spec"]["gpus_max"] = gpus_max;
  if (grows_onto != nullptr) snap.registry[0]["launcher"]["grows_onto"] = grows_onto;
  snap.jobs[0].gpus = gpus;
  snap.jobs[0].node_names.clear();
  snap.jobs[0].nodes.clear();
  for (auto& n : snap.nodes) n.gpus_used = 0;
  for (int i : on) {
    snap.jobs[0].node_names.push_back(snap.nodes[static_cast<std::size_t>(i)].name);
    snap.jobs[0].nodes += (snap.jobs[0].nodes.empty() ? "" : ",") + snap.nodes[static_cast<std::size_t>(i)].name;
    snap.nodes[static_cast<std::size_t>(i)].gpus_used = 1;
  }
  return snap;
}

// Two nodes of 4 GPUs; one elastic job at 1 GPU (up to 8) on the first, the second node idle.
RecordedSnapshot OneJobTwoNodes(const char* grows_onto) { return OneJob(2, {0}, 8, grows_onto); }

nlohmann::json Decision(const RecordedSnapshot& snap) {
  auto db = Database::Open(":memory:");
  EXPECT_TRUE(db.ok());
  SeedRegistry(*db.value(), snap.registry);
  ControllerConfig cfg;
  cfg.min_rescale_interval_s = 0;
  cfg.fit_budget_ms = 600000;  // every model fitted in the first epoch, however slow the build
  Controller ctl(cfg, std::move(db).value(), nullptr);
  EpochResult r = ctl.Epoch(snap.nodes, snap.jobs, /*dry_run=*/true);
  EXPECT_EQ(r.plan["decisions"].size(), 1u) << r.plan.dump();
  return r.plan["decisions"][0];
}

std::set<std::string> GroupNodes(const nlohmann::json& d) {
  std::set<std::string> nodes;
  for (const auto& g : d.value("groups", nlohmann::json::array())) nodes.insert(g["node"].get<std::string>());
  return nodes;
}

TEST(LeaderNodeGrowthTest, AJobOnItsLeaderNodeOnlyGrowsThereAndNoFurther) {
  RecordedSnapshot snap = OneJobTwoNodes("leader_node");
  const nlohmann::json d = Decision(snap);
  ASSERT_EQ(d["action"], "grow") << d.dump();
  EXPECT_EQ(d["target"], 4) << "the plan offers no more than the job's own node holds: " << d.dump();
  EXPECT_EQ(d["grows_onto"], "leader_node");
  EXPECT_EQ(GroupNodes(d), std::set<std::string>{snap.nodes[0].name}) << d.dump();
}

// Three nodes of 4 GPUs; a job at 1 GPU on each of the last two, the first node idle. Its runtime
// adds ranks on its leader's node only, to a world on that node alone: it is not grown.
TEST(LeaderNodeGrowthTest, AJobOnSeveralNodesIsNotGrown) {
  RecordedSnapshot snap = OneJob(3, {1, 2}, 12, "leader_node");
  const nlohmann::json d = Decision(snap);
  EXPECT_NE(d.value("action", ""), "grow") << d.dump();
  EXPECT_EQ(d["target"], 2) << d.dump();
  EXPECT_EQ(d["several_nodes"], true) << d.dump();
  EXPECT_TRUE(GroupNodes(d).empty()) << d.dump();
  // The same job whose runtime starts ranks anywhere (Open MPI 4) grows.
  snap.registry[0]["launcher"]["grows_onto"] = "any_node";
  const nlohmann::json anywhere = Decision(snap);
  EXPECT_EQ(anywhere["action"], "grow") << anywhere.dump();
  EXPECT_FALSE(anywhere.contains("several_nodes"));
}

TEST(LeaderNodeGrowthTest, AJobThatGrowsAnywhereUsesTheOtherNode) {
  for (const char* grows_onto : {"any_node", static_cast<const char*>(nullptr)}) {
    RecordedSnapshot snap = OneJobTwoNodes(grows_onto);
    const nlohmann::json d = Decision(snap);
    ASSERT_EQ(d["action"], "grow") << d.dump();
    EXPECT_EQ(d["target"], 8) << d.dump();
    EXPECT_FALSE(d.contains("grows_onto"));
    EXPECT_EQ(GroupNodes(d), (std::set<std::string>{snap.nodes[0].name, snap.nodes[1].name})) << d.dump();
  }
}

// A job whose runtime grows in place on its leader's node and onto other nodes by a relaunch
// (Open MPI 5 with the relaunch: "grows_onto": "relaunch") takes its leader's node first; growth
// that fits there joins in place, growth beyond it goes by relaunch, all of it.
TEST(LeaderNodeGrowthTest, AJobThatGrowsByRelaunchTakesItsLeadersNodeFirstThenOthersByRelaunch) {
  RecordedSnapshot snap = OneJobTwoNodes("relaunch");
  snap.nodes[1].gpus_used = 0;
  const nlohmann::json d = Decision(snap);
  ASSERT_EQ(d["action"], "grow") << d.dump();
  EXPECT_EQ(d["target"], 8) << d.dump();
  EXPECT_EQ(d["grows_onto"], "relaunch") << d.dump();
  ASSERT_EQ(d["groups"].size(), 2u) << d.dump();
  EXPECT_EQ(d["groups"][0]["node"], snap.nodes[0].name) << "the leader's node first: " << d.dump();
  EXPECT_EQ(d["groups"][1]["node"], snap.nodes[1].name) << d.dump();
}

TEST(LeaderNodeGrowthTest, AJobThatGrowsByRelaunchAndFitsOnItsLeadersNodeJoinsInPlace) {
  // Three nodes: the other two idle (more free GPUs than the leader's); the job may reach 3.
  RecordedSnapshot snap = OneJob(3, {0}, 3, "relaunch");
  const nlohmann::json d = Decision(snap);
  ASSERT_EQ(d["action"], "grow") << d.dump();
  EXPECT_EQ(d["target"], 3) << d.dump();
  EXPECT_FALSE(d.contains("grows_onto")) << "growth on the leader's node is in place: " << d.dump();
  EXPECT_EQ(GroupNodes(d), std::set<std::string>{snap.nodes[0].name}) << d.dump();
}

TEST(LeaderNodeGrowthTest, AJobThatGrowsByRelaunchOnSeveralNodesIsNotGrown) {
  RecordedSnapshot snap = OneJob(3, {1, 2}, 12, "relaunch");
  const nlohmann::json d = Decision(snap);
  EXPECT_NE(d.value("action", ""), "grow") << d.dump();
  EXPECT_EQ(d["several_nodes"], true) << d.dump();
}

}  // namespace
}  // namespace elastic::controller
