// Room for a waiting job's shape (G GPUs on each of N nodes): which nodes, which extensions must
// leave (ChooseRoom), and an epoch that grows a job without taking the GPUs such a job needs on
// the node chosen for it. The extension that leaves for it: controller_leave_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "controller.h"
#include "db.h"
#include "snapshot.h"
#include "waiting_job.h"
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

// A cluster of 4-GPU nodes with elastic jobs (their base on one node each) and their joined
// extensions, in a state database, driven by enacted epochs.
class RoomScene {
 public:
  struct Job {
    int node;  // index of the node of its base
    int base;
    int max;
    double rescaled_ago_s = -1;  // its last rescale (< 0: long ago)
  };
  struct Ext {
    int job;  // index into the jobs
    int group;
    int node;
    int gpus;
    double joined_ago_s;
  };

  RoomScene(int nodes, const std::vector<Job>& jobs, const std::vector<Ext>& exts, ControllerConfig cfg = {}) {
    snap_ = GenerateSnapshot(nodes, 4, 1, static_cast<int>(jobs.size()), 0, 3);
    EXPECT_EQ(snap_.registry.size(), jobs.size());
    for (auto& n : snap_.nodes) n.gpus_used = 0;
    for (std::size_t k = 0; k < jobs.size(); ++k) {
      snap_.registry[k]["samples"] = snap_.registry[0]["samples"];  // alike, so that sizes decide
      snap_.registry[k]["efficiency"] = snap_.registry[0]["efficiency"];
      snap_.registry[k]["base_gpus"] = jobs[k].base;
      snap_.registry[k]["spec"]["gpus_min"] = jobs[k].base;
      snap_.registry[k]["spec"]["gpus_max"] = jobs[k].max;
      JobInfo& j = snap_.jobs[k];
      j.gpus = jobs[k].base;
      j.nodes = Node(jobs[k].node);
      j.node_names = {j.nodes};
      snap_.nodes[static_cast<std::size_t>(jobs[k].node)].gpus_used += jobs[k].base;
    }
    const double now = Now();
    for (std::size_t k = 0; k < jobs.size(); ++k) {
      if (jobs[k].rescaled_ago_s >= 0) snap_.registry[k]["last_rescale_at"] = now - jobs[k].rescaled_ago_s;
    }
    auto db = Database::Open(":memory:");
    EXPECT_TRUE(db.ok());
    SeedRegistry(*db.value(), snap_.registry);
    for (const Ext& e : exts) {
      const uint32_t parent = snap_.jobs[static_cast<std::size_t>(e.job)].id;
      const auto slurm_job = static_cast<uint32_t>(90000 + 10 * e.job + e.group);
      SeedExtension(*db.value(), parent, e.group, slurm_job, Node(e.node), Type(), e.gpus, "joined", now - 1000,
                    now - e.joined_ago_s);
      JobInfo ext;
      ext.id = slurm_job;
      ext.user_id = snap_.jobs[static_cast<std::size_t>(e.job)].user_id;
      ext.state = SlurmJobState::kRunning;
      ext.gpus = e.gpus;
      ext.gpu_type = Type();
      ext.nodes = Node(e.node);
      snap_.jobs.push_back(ext);
      snap_.nodes[static_cast<std::size_t>(e.node)].gpus_used += e.gpus;
    }
    cfg.fit_budget_ms = 600000;  // every model fitted in the first epoch, however slow the build
    ctl_ = std::make_unique<Controller>(cfg, std::move(db).value(), nullptr);
  }

  // A rigid job that waits for `per_node` GPUs on each of `nodes` nodes.
  void Wait(uint32_t id, int nodes, int per_node) {
    snap_.jobs.push_back(WaitingJob(id, nodes * per_node, Type(), per_node, nodes));
  }

  // A rigid job running on node `node` with `gpus` GPUs.
  void Rigid(uint32_t id, int node, int gpus) {
    JobInfo rigid;
    rigid.id = id;
    rigid.state = SlurmJobState::kRunning;
    rigid.gpus = gpus;
    rigid.gpu_type = Type();
    rigid.nodes = Node(node);
    rigid.node_names = {rigid.nodes};
    snap_.jobs.push_back(rigid);
    snap_.nodes[static_cast<std::size_t>(node)].gpus_used += gpus;
  }

  EpochResult Epoch(bool dry_run = false) { return ctl_->Epoch(snap_.nodes, snap_.jobs, dry_run); }

  // Every extension as status shows it: "JOB-index/group" -> state.
  std::map<std::string, std::string> Extensions() {
    std::map<std::string, std::string> out;
    const nlohmann::json status = ctl_->Handle(0, {{"v", 1}, {"type", "status"}, {"id", 1}});
    for (const auto& j : status["jobs"]) {
      for (std::size_t k = 0; k < snap_.registry.size(); ++k) {
        if (j["job_id"] != snap_.jobs[k].id) continue;
        for (const auto& e : j["extensions"]) {
          out[std::to_string(k) + "/" + std::to_string(e["group"].get<int>())] = e["state"].get<std::string>();
        }
      }
    }
    return out;
  }

  std::string Node(int i) const { return snap_.nodes[static_cast<std::size_t>(i)].name; }
  std::string Type() const { return snap_.nodes[0].gpu_type; }

 private:
  RecordedSnapshot snap_;
  std::unique_ptr<Controller> ctl_;
};

TEST(WaitingRoomEpochTest, OnlyTheExtensionInTheWaitingJobsWayLeavesNotAlsoThePlansChoice) {
  // n1: A's base (2), B's latest extension (1), 1 free; n2: A's extension (2), 2 free; n3: B's
  // base (4). A job waits for a node with 4 GPUs free, and one more for a single GPU anywhere:
  // by count, A and B must give up 2 GPUs. Only A's extension on n2 makes room for the first;
  // once it leaves, the count is met too, and B's extension on n1 stays.
  RoomScene scene(3, {{0, 2, 8}, {2, 4, 8}}, {{0, 1, 1, 2, 100}, {1, 1, 0, 1, 50}});
  scene.Wait(99998, 1, 4);
  scene.Wait(99999, 1, 1);
  const EpochResult r = scene.Epoch();
  ASSERT_EQ(r.plan["room"].size(), 2u) << r.plan.dump();
  EXPECT_EQ(r.plan["room"][0]["job"], 99998) << r.plan["room"].dump();
  EXPECT_EQ(r.plan["room"][0]["action"], "release") << r.plan["room"].dump();
  EXPECT_EQ(r.plan["room"][0]["on"], nlohmann::json::array({scene.Node(1)})) << r.plan["room"].dump();
  EXPECT_EQ(r.plan["room"][1]["action"], "fits") << r.plan["room"].dump();
  EXPECT_EQ(scene.Extensions(), (std::map<std::string, std::string>{{"0/1", "leaving"}, {"1/1", "joined"}}))
      << r.plan["decisions"].dump();
}

TEST(WaitingRoomEpochTest, TwoWaitingJobsGetTwoNodesAndAFrozenJobKeepsItsExtension) {
  // n1, n2, n3: the bases of A, B and C (2 GPUs each) and an extension of 2 each: no GPU free. Two
  // jobs wait for a node with 2 GPUs free each. C rescaled 10 s ago (min_rescale_interval 60 s):
  // its extension stays. The first waiting job gets n1 (A's extension leaves), the second n2
  // (B's), not n1 again; then the count is met too, and nothing else leaves.
  ControllerConfig cfg;
  cfg.min_rescale_interval_s = 60;
  RoomScene scene(3, {{0, 2, 8}, {1, 2, 8}, {2, 2, 8, 10}}, {{0, 1, 0, 2, 300}, {1, 1, 1, 2, 200}, {2, 1, 2, 2, 100}},
                  cfg);
  scene.Wait(99997, 1, 2);
  scene.Wait(99998, 1, 2);
  const EpochResult r = scene.Epoch();
  ASSERT_EQ(r.plan["room"].size(), 2u) << r.plan.dump();
  EXPECT_EQ(r.plan["room"][0]["on"], nlohmann::json::array({scene.Node(0)})) << r.plan["room"].dump();
  EXPECT_EQ(r.plan["room"][1]["on"], nlohmann::json::array({scene.Node(1)})) << r.plan["room"].dump();
  EXPECT_EQ(scene.Extensions(),
            (std::map<std::string, std::string>{{"0/1", "leaving"}, {"1/1", "leaving"}, {"2/1", "joined"}}));
}

TEST(WaitingRoomEpochTest, AnExtensionOfAJobThatMayNotRescaleYetStays) {
  // n1, n2: the bases of A and B (2 GPUs each) and an extension of 2 each. A job waits for a node
  // with 2 GPUs free, but both rescaled 10 s ago (min_rescale_interval 60 s): nothing leaves yet,
  // and the room says none (the epoch looks again when they may rescale).
  ControllerConfig cfg;
  cfg.min_rescale_interval_s = 60;
  RoomScene scene(2, {{0, 2, 8, 10}, {1, 2, 8, 10}}, {{0, 1, 0, 2, 300}, {1, 1, 1, 2, 200}}, cfg);
  scene.Wait(99998, 1, 2);
  const EpochResult r = scene.Epoch();
  ASSERT_EQ(r.plan["room"].size(), 1u) << r.plan.dump();
  EXPECT_EQ(r.plan["room"][0]["action"], "none") << r.plan["room"].dump();
  EXPECT_EQ(scene.Extensions(), (std::map<std::string, std::string>{{"0/1", "joined"}, {"1/1", "joined"}}));
}

// Three nodes of 4 GPUs: elastic job A at 2 GPUs on n1 (up to 8, any node), a rigid job of 2 on n2,
// one of 3 on n3: 2 + 2 + 1 GPUs free. A rigid job waits for 2 GPUs on one node, so the plan
// gives A 3 more. Growing onto the nodes with the most free GPUs first would take n1's 2 and one
// of n2's, and leave no node with 2 free; the room made for the waiting job keeps n1's 2 for it.
TEST(WaitingRoomEpochTest, GrowthLeavesTheWaitingJobItsNode) {
  ControllerConfig cfg;
  cfg.min_rescale_interval_s = 0;
  RoomScene scene(3, {{0, 2, 8}}, {}, cfg);
  scene.Rigid(5001, 1, 2);
  scene.Rigid(5002, 2, 3);
  scene.Wait(99999, 1, 2);
  const EpochResult r = scene.Epoch(/*dry_run=*/true);
  ASSERT_EQ(r.plan["room"].size(), 1u) << r.plan.dump();
  EXPECT_EQ(r.plan["room"][0]["action"], "fits") << r.plan["room"].dump();
  EXPECT_EQ(r.plan["room"][0]["on"], nlohmann::json::array({scene.Node(0)})) << r.plan["room"].dump();
  ASSERT_EQ(r.plan["decisions"].size(), 1u) << r.plan.dump();
  const nlohmann::json& d = r.plan["decisions"][0];
  ASSERT_EQ(d["action"], "grow") << d.dump();
  EXPECT_EQ(d["target"], 5) << "all the free GPUs but the waiting job's 2: " << d.dump();
  std::set<std::string> onto;
  for (const auto& g : d["groups"]) onto.insert(g["node"].get<std::string>());
  EXPECT_EQ(onto, (std::set<std::string>{scene.Node(1), scene.Node(2)})) << d.dump();
}

}  // namespace
}  // namespace elastic::controller
