// The relaunch record (elastic_mpi/src/relaunch.h) and the leader launcher's side of a relaunch
// (elastic_mpi/launch/relauncher.h), without MPI: the world's check, the record taken, the
// rendezvous started again only where the world spans other nodes (Open MPI 5), and the DVM's
// agent mode running a command through a node's agent.
#include "relauncher.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "elastic/common/exit_codes.h"
#include "relaunch.h"

namespace {

using elastic::ErrorKind;
using elastic::mpi::ParseRelaunchWorld;
using elastic::mpi::RelaunchWorldRanks;
using nlohmann::json;

TEST(RelaunchWorld, NodesRanksAndAgents) {
  auto w = ParseRelaunchWorld(json::parse(R"([{"node": "n1", "ranks": 2},
                                              {"node": "n2", "ranks": 3, "agent": ["srun", "--jobid=7"]}])"));
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w.value().size(), 2u);
  EXPECT_EQ(w.value()[0].node, "n1");
  EXPECT_TRUE(w.value()[0].agent.empty());
  EXPECT_EQ(w.value()[1].ranks, 3);
  EXPECT_EQ(w.value()[1].agent, (std::vector<std::string>{"srun", "--jobid=7"}));
  EXPECT_EQ(RelaunchWorldRanks(json::parse(R"([{"node": "a", "ranks": 2}, {"node": "b", "ranks": 5, "agent": ["x"]}])"))
                .value(),
            7);
}

TEST(RelaunchWorld, BadWorldsAreRefusedNamingTheFault) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"node": "n1"})", "not a list"},
      {R"([])", "not a list"},
      {R"([{"ranks": 2}])", "without a node name"},
      {R"([{"node": "n1", "ranks": 2}, {"node": "n1", "ranks": 1}])", "twice"},
      {R"([{"node": "n1", "ranks": 0}])", "no rank count"},
      {R"([{"node": "n1", "ranks": 5000}])", "no rank count"},
      {R"([{"node": "n1,n2", "ranks": 1}])", "names node"},
      {R"([{"node": "n1", "ranks": 1, "agent": "srun"}])", "not a list"},
      {R"([{"node": "n1", "ranks": 1, "agent": [""]}])", "empty agent word"},
      {R"([{"node": "n1", "ranks": 1, "agent": ["srun"]}])", "names 0 nodes without an agent"},
      {R"([{"node": "n1", "ranks": 1}, {"node": "n2", "ranks": 1}])", "names 2 nodes without an agent"},
  };
  for (const auto& [text, why] : bad) {
    auto w = ParseRelaunchWorld(json::parse(text));
    ASSERT_FALSE(w.ok()) << text;
    EXPECT_EQ(w.status().kind(), ErrorKind::kProtocol) << text;
    EXPECT_NE(w.status().message().find(why), std::string::npos) << text << ": " << w.status().message();
  }
}

class RelauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/elastic-relaunch-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void WriteRecord(const std::string& world, const std::string& state = "") {
    json j{{"world", json::parse(world)}, {"state", state.empty() ? dir_ + "/state" : state}};
    std::ofstream(dir_ + "/" + elastic::mpi::kRelaunchRecord) << j.dump() << "\n";
  }

  // Process hooks that record what the launcher would start and stop; the "server" writes its URI.
  elastic::launch::ProcessHooks Hooks() {
    return {[this](const std::vector<std::string>& cmd) {
              started_.push_back(cmd);
              std::ofstream(dir_ + "/uri") << "uri-" << started_.size() << "\n";
              return static_cast<pid_t>(1000 + started_.size());
            },
            [this](pid_t pid, const std::vector<std::string>&) { stopped_.push_back(pid); },
            [](const std::string& path, double) { return std::filesystem::exists(path); }};
  }

  elastic::launch::Relauncher Make() {
    return elastic::launch::Relauncher({dir_, "/usr/bin/elastic-launch", "", "prte", dir_ + "/uri", 5}, Hooks(),
                                       &server_, &server_cmd_);
  }

  std::string dir_;
  std::vector<std::vector<std::string>> started_;
  std::vector<pid_t> stopped_;
  pid_t server_ = 42;
  std::vector<std::string> server_cmd_{"the-first-server"};
};

TEST_F(RelauncherTest, OnThisNodeTheRendezvousStaysAndTheLaunchGrows) {
  auto r = Make();
  EXPECT_FALSE(r.Asked());
  WriteRecord(R"([{"node": "n1", "ranks": 3}])");
  ASSERT_TRUE(r.Asked());
  elastic::mpi::stack::GroupLaunch group;
  auto here = r.Next(&group);
  ASSERT_TRUE(here.ok()) << here.status().message();
  EXPECT_EQ(here.value(), 3);
  EXPECT_EQ(group.ranks, 3);
  EXPECT_EQ(group.hosts, "");
  EXPECT_TRUE(started_.empty());
  EXPECT_TRUE(stopped_.empty());
  EXPECT_EQ(server_, 42);
  EXPECT_FALSE(r.Asked());  // the record was taken
  EXPECT_TRUE(std::filesystem::exists(r.record()));
}

TEST_F(RelauncherTest, OtherNodesRestartTheRendezvousOverThemOrAreRefused) {
  auto r = Make();
  // This launcher's node (no agent) named last: it comes first in the hosts (rank 0 there).
  WriteRecord(R"([{"node": "n2", "ranks": 2, "agent": ["srun", "-w", "n2"]}, {"node": "n1", "ranks": 2}])");
  elastic::mpi::stack::GroupLaunch group;
  auto here = r.Next(&group);
  if (!elastic::mpi::stack::RelaunchesAcrossNodes()) {  // Open MPI 4: this node only
    ASSERT_FALSE(here.ok());
    EXPECT_EQ(here.status().kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(here.status().message().find("launcher's node only"), std::string::npos) << here.status().message();
    EXPECT_TRUE(started_.empty());
    return;
  }
  ASSERT_TRUE(here.ok()) << here.status().message();
  EXPECT_EQ(here.value(), 2);
  EXPECT_EQ(group.ranks, 4);
  EXPECT_EQ(group.hosts, "n1:2,n2:2");
  EXPECT_EQ(stopped_, (std::vector<pid_t>{42}));  // the old DVM first
  ASSERT_EQ(started_.size(), 1u);
  const std::string cmd = [&] {
    std::string all;
    for (const auto& a : started_[0]) all += a + " ";
    return all;
  }();
  EXPECT_NE(cmd.find("--host n1:2,n2:2 "), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("plm_ssh_agent /usr/bin/elastic-launch --agent " + r.record()), std::string::npos) << cmd;
  EXPECT_EQ(cmd.find("plm_slurm_args"), std::string::npos) << cmd;
  // Back to this node alone: a DVM without the other node (its daemon leaves with the old DVM).
  WriteRecord(R"([{"node": "n1", "ranks": 2}])");
  here = r.Next(&group);
  ASSERT_TRUE(here.ok()) << here.status().message();
  EXPECT_EQ(group.hosts, "");
  ASSERT_EQ(started_.size(), 2u);
  EXPECT_EQ(stopped_.size(), 2u);
  // And again on this node: nothing to restart.
  WriteRecord(R"([{"node": "n1", "ranks": 1}])");
  ASSERT_TRUE(r.Next(&group).ok());
  EXPECT_EQ(started_.size(), 2u);
}

TEST_F(RelauncherTest, AWorldThatEndedBeforeTakingTheStateFallsBackOnceToTheWorldBeforeIt) {
  const std::string state = dir_ + "/state";
  std::ofstream(state) << "ELCKPT01 the state";
  {
    json j{{"world", json::parse(R"([{"node": "n1", "ranks": 3}])")}, {"state", state}, {"ranks", 3},
           {"from_ranks", 2}, {"command", 7}, {"from_world", json::parse(R"([{"node": "n1", "ranks": 2}])")}};
    std::ofstream(dir_ + "/" + elastic::mpi::kRelaunchRecord) << j.dump() << "\n";
  }
  auto r = Make();
  elastic::mpi::stack::GroupLaunch group;
  ASSERT_TRUE(r.Next(&group).ok());
  EXPECT_EQ(group.ranks, 3);
  // The new world ended before its rank 0 took the state: the one before it, as it was.
  ASSERT_TRUE(r.FallBack("it ended with status 1 before it took the state"));
  ASSERT_TRUE(r.Asked());
  EXPECT_TRUE(r.Continues(1));
  json j = json::parse(std::ifstream(dir_ + "/" + elastic::mpi::kRelaunchRecord));
  EXPECT_EQ(j["world"], json::parse(R"([{"node": "n1", "ranks": 2}])"));
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_EQ(j["command"], 7);
  EXPECT_EQ(j["state"], state);
  EXPECT_FALSE(j.contains("from_world"));
  EXPECT_NE(j.value("failed", "").find("[{\"node\":\"n1\",\"ranks\":3}]: it ended with status 1"), std::string::npos)
      << j.dump();
  auto here = r.Next(&group);
  ASSERT_TRUE(here.ok()) << here.status().message();
  EXPECT_EQ(here.value(), 2);
  EXPECT_EQ(group.ranks, 2);
  // Once: if that world also ends before it takes the state, the state is the checkpoint.
  EXPECT_FALSE(r.FallBack("again"));
  EXPECT_FALSE(r.Asked());
  EXPECT_TRUE(r.Finish(dir_ + "/checkpoint/checkpoint.bin"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/checkpoint/checkpoint.bin"));
}

TEST_F(RelauncherTest, NoFallBackOnceTheStateWasTakenOrWithoutTheWorldBefore) {
  const std::string state = dir_ + "/state";
  auto r = Make();
  elastic::mpi::stack::GroupLaunch group;
  // The state taken (the new world's rank 0 removes it): that world ran; its failure is its own.
  std::ofstream(state) << "ELCKPT01";
  {
    json j{{"world", json::parse(R"([{"node": "n1", "ranks": 3}])")}, {"state", state},
           {"from_world", json::parse(R"([{"node": "n1", "ranks": 2}])")}};
    std::ofstream(dir_ + "/" + elastic::mpi::kRelaunchRecord) << j.dump() << "\n";
  }
  ASSERT_TRUE(r.Next(&group).ok());
  std::filesystem::remove(state);
  EXPECT_FALSE(r.FallBack("it ended with status 1"));
  EXPECT_FALSE(r.Asked());
  // A record without the world before it (nodes taken away: they are gone).
  std::ofstream(state) << "ELCKPT01";
  WriteRecord(R"([{"node": "n1", "ranks": 2}])", state);
  ASSERT_TRUE(r.Next(&group).ok());
  EXPECT_FALSE(r.FallBack("it ended with status 1"));
  EXPECT_FALSE(r.Continues(1));
  // A world that wrote a record of its own is relaunched by it, not undone.
  WriteRecord(R"([{"node": "n1", "ranks": 1}])", state);
  EXPECT_FALSE(r.FallBack("it ended with status 0"));
}

TEST_F(RelauncherTest, TheWorldMustNameThisNodeOnce) {
  auto r = Make();
  WriteRecord(R"([{"node": "n1", "ranks": 2}, {"node": "n2", "ranks": 2}])");
  elastic::mpi::stack::GroupLaunch group;
  auto here = r.Next(&group);
  ASSERT_FALSE(here.ok());
  EXPECT_NE(here.status().message().find("names 2"), std::string::npos) << here.status().message();
}

TEST_F(RelauncherTest, AStateNoWorldTookBecomesTheCheckpoint) {
  const std::string older = dir_ + "/older-state";
  const std::string state = dir_ + "/left-state";
  std::ofstream(older) << "old";
  std::ofstream(state) << "ELCKPT01 the latest";
  auto r = Make();
  elastic::mpi::stack::GroupLaunch group;
  WriteRecord(R"([{"node": "n1", "ranks": 2}])", older);
  ASSERT_TRUE(r.Next(&group).ok());
  WriteRecord(R"([{"node": "n1", "ranks": 3}])", state);
  ASSERT_TRUE(r.Next(&group).ok());
  const std::string checkpoint = dir_ + "/checkpoint/checkpoint.bin";
  r.Finish(checkpoint);
  EXPECT_FALSE(std::filesystem::exists(state));
  EXPECT_FALSE(std::filesystem::exists(older));
  std::ifstream in(checkpoint);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "ELCKPT01 the latest");
}

TEST_F(RelauncherTest, ARecordNoWorldTookKeepsItsStateAsTheCheckpoint) {
  // The job ends (SIGTERM, a failed rank) after rank 0 wrote the record: Abandon, then Finish.
  const std::string state = dir_ + "/stopped-state";
  std::ofstream(state) << "ELCKPT01 stopped";
  auto r = Make();
  WriteRecord(R"([{"node": "n1", "ranks": 2}])", state);
  r.Abandon();
  EXPECT_FALSE(r.Asked());
  EXPECT_TRUE(r.Finish(dir_ + "/checkpoint/checkpoint.bin"));
  std::ifstream in(dir_ + "/checkpoint/checkpoint.bin");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "ELCKPT01 stopped");
  EXPECT_FALSE(std::filesystem::exists(state));
}

TEST_F(RelauncherTest, ALeftoverRecordAtStartIsRemovedAndItsStateKept) {
  const std::string state = dir_ + "/earlier-run-state";
  std::ofstream(state) << "ELCKPT01 earlier";
  WriteRecord(R"([{"node": "n1", "ranks": 2}])", state);
  elastic::launch::KeepLeftoverRecord(dir_, dir_ + "/checkpoint/checkpoint.bin");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + elastic::mpi::kRelaunchRecord));
  EXPECT_FALSE(std::filesystem::exists(state));
  std::ifstream in(dir_ + "/checkpoint/checkpoint.bin");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "ELCKPT01 earlier");
  // A record whose state is gone (taken, or on another node) changes nothing else.
  WriteRecord(R"([{"node": "n1", "ranks": 2}])", dir_ + "/gone");
  elastic::launch::KeepLeftoverRecord(dir_, dir_ + "/checkpoint/checkpoint.bin");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + elastic::mpi::kRelaunchRecord));
}

TEST_F(RelauncherTest, AWorldThatLostNodesGoesOnOnlyWhenItsRecordSaysSo) {
  // Ended 0 with a record: the relaunch. Ended with an error: only when rank 0's record names
  // the nodes taken away (their daemons end first and may take the DVM's job down with them).
  auto r = Make();
  EXPECT_FALSE(r.Continues(0));  // no record
  WriteRecord(R"([{"node": "n1", "ranks": 2}])");
  EXPECT_TRUE(r.Continues(0));
  EXPECT_FALSE(r.Continues(195));
  json j{{"world", json::parse(R"([{"node": "n1", "ranks": 2}])")}, {"state", dir_ + "/state"},
         {"left_nodes", json::array({"n2"})}};
  std::ofstream(dir_ + "/" + elastic::mpi::kRelaunchRecord) << j.dump() << "\n";
  EXPECT_TRUE(r.Continues(195));
}

TEST_F(RelauncherTest, AWorldEndedByItsRanksElsewhereGettingSigtermIsRestartedNotFailed) {
  // No record (the world ended before its rank 0 could start it again without them): the
  // SIGTERM marks of the ranks on other nodes make a failure exit 75; this node's own marks (the
  // job itself ends), success and 75 itself stay as they are.
  auto r = Make();
  EXPECT_EQ(r.AfterNodesTaken(195), 195);
  const std::string own = dir_ + "/" + elastic::mpi::kSignalledPrefix + elastic::mpi::ThisNodeName();
  std::ofstream(own).flush();
  EXPECT_EQ(r.AfterNodesTaken(195), 195);
  std::ofstream(dir_ + "/" + elastic::mpi::kSignalledPrefix + "n2-elsewhere").flush();
  EXPECT_EQ(r.AfterNodesTaken(195), elastic::kExitWorldLost);
  EXPECT_EQ(r.AfterNodesTaken(0), 0);
  r.ClearSignalled();
  EXPECT_EQ(r.AfterNodesTaken(195), 195);
  EXPECT_FALSE(std::filesystem::exists(own));
  // Marks of an earlier run of the job are gone once its leader starts again.
  std::ofstream(dir_ + "/" + elastic::mpi::kSignalledPrefix + "n3").flush();
  elastic::launch::KeepLeftoverRecord(dir_, dir_ + "/checkpoint/checkpoint.bin");
  EXPECT_EQ(r.AfterNodesTaken(195), 195);
}

TEST_F(RelauncherTest, ATakenStateLeavesTheCheckpointAlone) {
  auto r = Make();
  elastic::mpi::stack::GroupLaunch group;
  WriteRecord(R"([{"node": "n1", "ranks": 2}])", dir_ + "/taken-state");  // the new world removed it
  ASSERT_TRUE(r.Next(&group).ok());
  std::filesystem::create_directory(dir_ + "/checkpoint");
  std::ofstream(dir_ + "/checkpoint/checkpoint.bin") << "the program's own";
  EXPECT_FALSE(r.Finish(dir_ + "/checkpoint/checkpoint.bin"));
  std::ifstream in(dir_ + "/checkpoint/checkpoint.bin");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "the program's own");
}

TEST_F(RelauncherTest, TheAgentRunsTheCommandThroughTheNodesAgent) {
  const std::string out = dir_ + "/ran";
  // The node's agent: env(1) with a variable, as `srun ...` would run the rest on that node.
  json j{{"world", json::parse(R"([{"node": "n1", "ranks": 1}, {"node": "n2", "ranks": 1, "agent": ["env", "RELAUNCH_TEST=via-agent"]}])")}};
  const std::string record = dir_ + "/relaunched.json";
  std::ofstream(record) << j.dump() << "\n";
  auto run = [&](std::vector<std::string> args) {
    const pid_t pid = fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      _exit(elastic::launch::AgentMain(static_cast<int>(argv.size() - 1), argv.data()));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run({"elastic-launch", "--agent", record, "n2", "echo", "$RELAUNCH_TEST", ">", out}), 0);
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "via-agent");
  EXPECT_NE(run({"elastic-launch", "--agent", record, "n9", "true"}), 0);  // no such node
  EXPECT_NE(run({"elastic-launch", "--agent", record}), 0);                // usage
}

}  // namespace
