// What a job's runtime receives when it polls (controller/src/command_delivery.cpp), without
// Slurm: a relaunch goes alone, once the commands before it are acknowledged, with its world
// made then (a grow before it that failed is not in it); groups ready together join in one
// relaunch (groups leaving together leave in one), and a ready group waits (extensions.relaunch_gather at most) for the job's other
// groups on their way; a group joining by relaunch has
// extensions.ready_timeout from its grow command, not from its submission; and a relaunch group
// on the job's own node whose extension job ended from outside is relaunched away
// (lifecycle.cpp, EndedFromOutside).
#include <gtest/gtest.h>

#include <string>

#include "controller.h"
#include "db.h"
#include "db_records.h"
#include "running_extension.h"
#include "snapshot.h"
#include "state_file.h"

namespace elastic::controller {
namespace {

// Three nodes of 4 GPUs. Job A runs 2 GPUs on n1, grows by relaunch (its launcher registered
// "grows_onto": "relaunch" and 2 ranks); its relaunch groups are in the states each test seeds:
// group 1 (2 GPUs, extension job 90001) on n2, group 2 (2 GPUs, 90002) on n3.
class CommandDeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    snap_ = GenerateSnapshot(3, 4, 1, 1, 0, 5);
    ASSERT_EQ(snap_.registry.size(), 1u);
    nlohmann::json& job = snap_.registry[0];
    job["base_gpus"] = 2;
    job["spec"]["gpus_min"] = 2;
    job["spec"]["gpus_max"] = 6;
    job["launcher"] = {{"grows_onto", "relaunch"}, {"ranks", 2}};
    job["relaunch_groups"] = {1, 2};
    parent_ = job["id"].get<uint32_t>();
    owner_ = job["uid"].get<uid_t>();
    JobInfo& base = snap_.jobs[0];
    base.gpus = 2;
    base.nodes = "n1";
    base.node_names = {"n1"};
    for (int group : {1, 2}) {  // the extension jobs, running
      snap_.jobs.push_back(RunningExtensionJob(static_cast<uint32_t>(90000 + group), owner_,
                                               "n" + std::to_string(group + 1), snap_.nodes[0].gpu_type, 2));
    }
    for (auto& n : snap_.nodes) n.gpus_used = 2;
  }

  // The job, its groups in `state1` and `state2` (created `age_s` ago), and relaunch commands
  // queued as elasticd queues them (bodies without a world), in order.
  void Seed(const std::string& state1, const std::string& state2, const std::vector<nlohmann::json>& commands,
            double age_s = 10, const std::string& node1 = "n2") {
    auto db = Database::Open(path_);
    ASSERT_TRUE(db.ok());
    SeedRegistry(*db.value(), snap_.registry);
    const double t = Now() - age_s;
    SeedExtension(*db.value(), parent_, 1, 90001, node1, snap_.nodes[0].gpu_type, 2, state1, t,
                  state1 == "joined" ? t : 0);
    SeedExtension(*db.value(), parent_, 2, 90002, "n3", snap_.nodes[0].gpu_type, 2, state2, t,
                  state2 == "joined" ? t : 0);
    for (const auto& body : commands) records::QueueCommand(*db.value(), parent_, body, t);
  }

  std::unique_ptr<Controller> Start() {
    auto ctl = state_.OpenController({});
    ctl->Epoch(snap_.nodes, snap_.jobs, /*dry_run=*/true);  // elasticd's view of the job's node
    return ctl;
  }

  nlohmann::json Poll(Controller& ctl) {
    nlohmann::json r = ctl.Handle(owner_, {{"v", 1}, {"type", "poll"}, {"id", ++id_}, {"job", parent_}, {"wait_ms", 0}});
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    return r["commands"];
  }

  nlohmann::json Ack(Controller& ctl, const nlohmann::json& cmd, bool ok, const nlohmann::json& phases = nullptr) {
    nlohmann::json msg = {{"v", 1}, {"type", "ack"}, {"id", ++id_}, {"job", parent_}, {"command", cmd["command"]},
                          {"ok", ok}};
    if (!phases.is_null()) msg["phases"] = phases;
    if (!ok) msg["error"] = "the new world did not start";
    return ctl.Handle(owner_, msg);
  }

  // The nodes of a relaunch command's world, in order ("n1:2,n2:2").
  static std::string Nodes(const nlohmann::json& cmd) {
    std::string out;
    for (const auto& w : cmd.at("world")) {
      out += (out.empty() ? "" : ",") + w["node"].get<std::string>() + ":" + std::to_string(w["ranks"].get<int>());
    }
    return out;
  }

  StateFile state_;
  const std::string& path_ = state_.path();
  RecordedSnapshot snap_;
  uint32_t parent_ = 0;
  uid_t owner_ = 0;
  int id_ = 0;
};

const nlohmann::json kGrow1 = {{"action", "relaunch"}, {"op", "grow"}, {"group", 1}, {"gpus", 4}, {"global_batch", 128}};
const nlohmann::json kGrow2 = {{"action", "relaunch"}, {"op", "grow"}, {"group", 2}, {"gpus", 6}, {"global_batch", 192}};

TEST_F(CommandDeliveryTest, ARelaunchQueuedBehindAFailedGrowLeavesItsNodeOut) {
  // Group 1 is ready (its relaunch queued 30 s ago: it waited long enough for group 2, which is
  // still starting): its relaunch goes alone.
  Seed("joining", "registered", {kGrow1});
  {
    auto db = Database::Open(path_);
    ASSERT_TRUE(db.ok());
    records::StartRescale(*db.value(), parent_, "grow", 1, 2, 4, Now() - 30);
  }
  auto ctl = Start();
  nlohmann::json cmds = Poll(*ctl);
  ASSERT_EQ(cmds.size(), 1u) << cmds.dump();
  EXPECT_EQ(cmds[0]["group"], 1);
  EXPECT_FALSE(cmds[0].contains("groups")) << cmds.dump();
  EXPECT_EQ(Nodes(cmds[0]), "n1:2,n2:2") << "group 1 joins; group 2 is not in the world yet";
  EXPECT_EQ(cmds[0]["world"][1]["agent"].dump().find("--jobid=90001") != std::string::npos, true) << cmds.dump();

  // Group 2 becomes ready now: its relaunch waits for the first.
  nlohmann::json ready = ctl->Handle(owner_, {{"v", 1}, {"type", "ready"}, {"id", ++id_}, {"job", parent_}, {"group", 2}});
  ASSERT_TRUE(ready.value("ok", false)) << ready.dump();
  nlohmann::json again = Poll(*ctl);
  ASSERT_EQ(again.size(), 1u) << "the second relaunch waits for the first: " << again.dump();
  EXPECT_EQ(again[0], cmds[0]) << "sent again, unchanged, until it is acknowledged";

  // Group 1's relaunch fails: its extension ends, and the next relaunch's world leaves n2 out.
  ASSERT_TRUE(Ack(*ctl, cmds[0], false).value("ok", false));
  nlohmann::json next = Poll(*ctl);
  ASSERT_EQ(next.size(), 1u) << next.dump();
  EXPECT_EQ(next[0]["group"], 2);
  EXPECT_EQ(Nodes(next[0]), "n1:2,n3:2") << next.dump();
}

// The relaunch commands among `cmds`.
std::vector<nlohmann::json> Relaunches(const nlohmann::json& cmds) {
  std::vector<nlohmann::json> out;
  for (const auto& c : cmds) {
    if (c.value("action", "") == "relaunch") out.push_back(c);
  }
  return out;
}

// Group `group`'s state in elasticd's status.
std::string GroupState(Controller& ctl, uid_t uid, uint32_t parent, int group) {
  const nlohmann::json status = ctl.Handle(uid, {{"v", 1}, {"type", "status"}, {"id", 1}});
  for (const auto& j : status["jobs"]) {
    if (j["job_id"] != parent) continue;
    for (const auto& e : j["extensions"]) {
      if (e["group"] == group) return e["state"];
    }
  }
  return "gone";
}

TEST_F(CommandDeliveryTest, GroupsReadyTogetherJoinInOneRelaunch) {
  // Both groups of one epoch's growth are ready, a relaunch queued for each: one relaunch brings
  // both in (a relaunch stops and starts the whole world: two would pause the job twice).
  Seed("joining", "joining", {kGrow1, kGrow2});
  {
    auto db = Database::Open(path_);
    ASSERT_TRUE(db.ok());
    for (int group : {1, 2}) records::StartRescale(*db.value(), parent_, "grow", group, 2, 4, Now() - 2);  // as OnReady
  }
  auto ctl = Start();
  nlohmann::json cmds = Poll(*ctl);
  ASSERT_EQ(cmds.size(), 1u) << cmds.dump();
  EXPECT_EQ(Nodes(cmds[0]), "n1:2,n2:2,n3:2") << cmds.dump();
  EXPECT_EQ(cmds[0]["groups"], nlohmann::json::array({1, 2})) << cmds.dump();
  EXPECT_EQ(cmds[0]["gpus"], 6);
  EXPECT_EQ(cmds[0]["global_batch"], 192) << "the batch of the last size";
  {
    auto db = Database::Open(path_);
    ASSERT_TRUE(db.ok());
    std::string folded;
    db.value()->Run("SELECT state || ' ' || result FROM commands WHERE json_extract(body, '$.group') = 2", {},
                    [&](sqlite3_stmt* st) { folded = Database::Text(st, 0); });
    EXPECT_EQ(folded, "cancelled {\"folded_into\":" + std::to_string(cmds[0]["command"].get<int64_t>()) + "}");
  }
  EXPECT_EQ(Poll(*ctl), cmds) << "sent again, unchanged, until it is acknowledged";

  nlohmann::json ack = Ack(*ctl, cmds[0], true, {{"pause_s", 1.5}});
  ASSERT_TRUE(ack.value("ok", false)) << ack.dump();
  EXPECT_EQ(GroupState(*ctl, owner_, parent_, 1), "joined");
  EXPECT_EQ(GroupState(*ctl, owner_, parent_, 2), "joined");
  EXPECT_TRUE(Relaunches(Poll(*ctl)).empty()) << "no second relaunch";
  // The journal: one group after the other (2 -> 4 -> 6), and the one pause once.
  auto db = Database::Open(path_);
  ASSERT_TRUE(db.ok());
  std::string rescales;
  db.value()->Run("SELECT grp, from_gpus, to_gpus, ok, pause_s FROM rescales ORDER BY grp", {}, [&](sqlite3_stmt* st) {
    rescales += std::to_string(Database::Int(st, 0)) + ":" + std::to_string(Database::Int(st, 1)) + "->" +
                std::to_string(Database::Int(st, 2)) + " ok " + std::to_string(Database::Int(st, 3)) + " pause " +
                std::to_string(Database::Real(st, 4)) + "; ";
  });
  EXPECT_EQ(rescales, "1:2->4 ok 1 pause 1.500000; 2:4->6 ok 1 pause 0.000000; ");
}

TEST_F(CommandDeliveryTest, GroupsLeavingInOneEpochLeaveInOneRelaunch) {
  // Both groups leave in one epoch (a shrink relaunch queued for each, group 2 first, 6 -> 4 ->
  // 2): one relaunch over the job's node alone.
  Seed("leaving", "leaving",
       {{{"action", "relaunch"}, {"op", "shrink"}, {"group", 2}, {"gpus", 4}, {"global_batch", 128}},
        {{"action", "relaunch"}, {"op", "shrink"}, {"group", 1}, {"gpus", 2}, {"global_batch", 64}}});
  auto ctl = Start();
  nlohmann::json cmds = Poll(*ctl);
  ASSERT_EQ(cmds.size(), 1u) << cmds.dump();
  EXPECT_EQ(Nodes(cmds[0]), "n1:2") << cmds.dump();
  EXPECT_EQ(cmds[0]["groups"], nlohmann::json::array({1, 2})) << cmds.dump();
  EXPECT_EQ(cmds[0]["gpus"], 2);
  EXPECT_EQ(cmds[0]["global_batch"], 64) << "the batch of the last size";
  ASSERT_TRUE(Ack(*ctl, cmds[0], true).value("ok", false));
  EXPECT_EQ(GroupState(*ctl, owner_, parent_, 1), "gone");
  EXPECT_EQ(GroupState(*ctl, owner_, parent_, 2), "gone");
  EXPECT_TRUE(Relaunches(Poll(*ctl)).empty()) << "no second relaunch";
}

TEST_F(CommandDeliveryTest, AReadyGroupWaitsForTheGroupsOnTheirWay) {
  // Both groups' extension jobs started; group 1's launcher is ready first. Its relaunch waits
  // for group 2, and then both join in one.
  Seed("registered", "registered", {});
  auto ctl = Start();
  auto ready = [&](int group) {
    nlohmann::json r = ctl->Handle(owner_, {{"v", 1}, {"type", "ready"}, {"id", ++id_}, {"job", parent_}, {"group", group}});
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
  };
  ready(1);
  EXPECT_TRUE(Relaunches(Poll(*ctl)).empty()) << "group 2 is on its way";
  ready(2);
  const std::vector<nlohmann::json> relaunches = Relaunches(Poll(*ctl));
  ASSERT_EQ(relaunches.size(), 1u);
  EXPECT_EQ(Nodes(relaunches[0]), "n1:2,n2:2,n3:2") << relaunches[0].dump();
  EXPECT_EQ(relaunches[0]["gpus"], 6);

  // Failed: both groups end.
  ASSERT_TRUE(Ack(*ctl, relaunches[0], false).value("ok", false));
  EXPECT_EQ(GroupState(*ctl, owner_, parent_, 1), "gone");
  EXPECT_EQ(GroupState(*ctl, owner_, parent_, 2), "gone");
}

TEST_F(CommandDeliveryTest, TheWaitForTheOtherGroupsIsBounded) {
  // Group 1 has been ready for 8 s, group 2 is still starting: with relaunch_gather 10 s group 1
  // waits; with 5 s it goes alone.
  for (const double gather : {10.0, 5.0}) {
    SCOPED_TRACE("relaunch_gather " + std::to_string(gather));
    state_.Renew();
    Seed("joining", "registered", {kGrow1});
    {
      auto db = Database::Open(path_);
      ASSERT_TRUE(db.ok());
      records::StartRescale(*db.value(), parent_, "grow", 1, 2, 4, Now() - 8);
    }
    ControllerConfig cfg;
    cfg.relaunch_gather_s = gather;
    auto ctl = state_.OpenController(cfg);
    ctl->Epoch(snap_.nodes, snap_.jobs, /*dry_run=*/true);
    const std::vector<nlohmann::json> relaunches = Relaunches(Poll(*ctl));
    if (gather > 8) {
      EXPECT_TRUE(relaunches.empty());
    } else {
      ASSERT_EQ(relaunches.size(), 1u);
      EXPECT_EQ(Nodes(relaunches[0]), "n1:2,n2:2");
    }
  }
}

TEST_F(CommandDeliveryTest, ARelaunchWaitsForTheCommandsBeforeItAndTheOnesAfterItWaitWithIt) {
  // Group 1 joined; a set_batch is delivered and not acknowledged; then group 1 leaves by
  // relaunch, and a later set_batch follows it.
  Seed("leaving", "cancelled",
       {{{"action", "set_batch"}, {"global_batch", 256}},
        {{"action", "relaunch"}, {"op", "shrink"}, {"group", 1}, {"gpus", 2}, {"global_batch", 64}},
        {{"action", "set_batch"}, {"global_batch", 96}}});
  auto ctl = Start();
  nlohmann::json cmds = Poll(*ctl);
  ASSERT_EQ(cmds.size(), 1u) << cmds.dump();
  EXPECT_EQ(cmds[0]["action"], "set_batch");
  EXPECT_EQ(cmds[0]["global_batch"], 256);
  ASSERT_TRUE(Ack(*ctl, cmds[0], true).value("ok", false));

  cmds = Poll(*ctl);
  ASSERT_EQ(cmds.size(), 2u) << "the relaunch, and the command after it: " << cmds.dump();
  EXPECT_EQ(cmds[0]["action"], "relaunch");
  EXPECT_EQ(Nodes(cmds[0]), "n1:2") << "group 1 leaves: the leader's node alone";
  EXPECT_EQ(cmds[1]["global_batch"], 96);
}

TEST_F(CommandDeliveryTest, AGroupJoiningByRelaunchHasReadyTimeoutFromItsGrowCommand) {
  // Group 1 was submitted 400 s ago (longer than ready_timeout, 300 s), became ready and its
  // relaunch was queued 5 s ago: it is not cancelled. Group 2, submitted as long ago and never
  // ready, is.
  snap_.registry[0]["spec"]["gpus_max"] = 4;  // the plan wants no more than group 1 brings
  Seed("joining", "submitted", {kGrow1}, 400);
  {
    auto db = Database::Open(path_);
    ASSERT_TRUE(db.ok());
    records::StartRescale(*db.value(), parent_, "grow", 1, 2, 4, Now() - 5);
  }
  auto ctl = Start();
  ctl->Epoch(snap_.nodes, snap_.jobs, /*dry_run=*/false);
  const nlohmann::json status = ctl->Handle(owner_, {{"v", 1}, {"type", "status"}, {"id", 1}});
  std::map<int, std::string> states;
  for (const auto& j : status["jobs"]) {
    if (j["job_id"] != parent_) continue;
    for (const auto& e : j["extensions"]) states[e["group"].get<int>()] = e["state"].get<std::string>();
  }
  EXPECT_EQ(states[1], "joining") << status.dump();
  EXPECT_EQ(states.count(2), 0u) << "group 2 did not become ready within ready_timeout: " << status.dump();
  nlohmann::json cmds = Poll(*ctl);
  ASSERT_EQ(cmds.size(), 1u) << cmds.dump();
  EXPECT_EQ(Nodes(cmds[0]), "n1:2,n2:2");
}

TEST_F(CommandDeliveryTest, AGroupOnTheJobsOwnNodeWhoseExtensionJobEndedIsRelaunchedAway) {
  // Group 1 joined on n1, the job's own node (its ranks run in the job's step there), group 2 on
  // n3. Group 1's extension job ends from outside (scancel): Slurm's end of it reaches none of
  // its ranks, so elasticd starts the world again without them.
  snap_.registry[0]["spec"]["gpus_max"] = 4;  // the plan does not grow it again
  Seed("joined", "joined", {}, 10, "n1");
  std::erase_if(snap_.jobs, [](const JobInfo& j) { return j.id == 90001; });
  auto ctl = Start();
  ctl->Epoch(snap_.nodes, snap_.jobs, /*dry_run=*/false);
  const std::vector<nlohmann::json> relaunches = Relaunches(Poll(*ctl));
  ASSERT_EQ(relaunches.size(), 1u);
  EXPECT_EQ(relaunches[0]["op"], "shrink");
  EXPECT_EQ(relaunches[0]["group"], 1);
  EXPECT_EQ(Nodes(relaunches[0]), "n1:2,n3:2") << "group 1's 2 ranks on n1 are gone: " << relaunches[0].dump();
}

TEST_F(CommandDeliveryTest, AGroupOnAnotherNodeWhoseExtensionJobEndedNeedsNoCommand) {
  // The same on n2: its ranks got SIGTERM with the extension job, and the runtime starts the
  // world again without n2 by itself (docs/runtime.md, "A node taken away"); a command would
  // relaunch it a second time.
  snap_.registry[0]["spec"]["gpus_max"] = 4;
  Seed("joined", "joined", {});
  std::erase_if(snap_.jobs, [](const JobInfo& j) { return j.id == 90001; });
  auto ctl = Start();
  ctl->Epoch(snap_.nodes, snap_.jobs, /*dry_run=*/false);
  EXPECT_TRUE(Relaunches(Poll(*ctl)).empty());
  const nlohmann::json status = ctl->Handle(owner_, {{"v", 1}, {"type", "status"}, {"id", 1}});
  for (const auto& j : status["jobs"]) {
    if (j["job_id"] != parent_) continue;
    EXPECT_EQ(j["gpus"], 4) << "group 1 is out of the job: " << j.dump();
  }
}

}  // namespace
}  // namespace elastic::controller
