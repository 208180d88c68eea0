// The world elasticd puts in a relaunch command (controller/src/relaunch_world.h).
#include "relaunch_world.h"

#include <gtest/gtest.h>

namespace elastic::controller {
namespace {

nlohmann::json Agent(uint32_t job, const std::string& node) { return RelaunchAgent(job, node); }

TEST(RelaunchWorld, TheAgentStartsAProcessInTheExtensionJobWithoutTheBaseJobsIdentity) {
  const std::vector<std::string> a = RelaunchAgent(107, "n2");
  ASSERT_GE(a.size(), 8u);
  EXPECT_EQ(a.front(), "env");
  const std::vector<std::string> tail(a.end() - 7, a.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"srun", "--jobid=107", "--overlap", "-N1", "-n1", "-w", "n2"}));
  auto unsets = [&](const std::string& var) {
    for (std::size_t i = 0; i + 1 < a.size(); ++i) {
      if (a[i] == "-u" && a[i + 1] == var) return true;
    }
    return false;
  };
  for (const char* var : {"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID", "SLURM_STEPID",
                          "_SLURM_SPANK_OPTION_elastic_elastic_gpus", "_SLURM_SPANK_OPTION_elastic_elastic_extension",
                          "_SLURM_SPANK_OPTION_elastic_elastic_lr_scaling",
                          "SLURM_SPANK__SLURM_SPANK_OPTION_elastic_elastic_gpus"}) {
    EXPECT_TRUE(unsets(var)) << var;
  }
}

TEST(RelaunchWorld, TheRankAgentIsTheSameAgentForTheScriptsShellWithoutSlurmsMpiPlugin) {
  // The extension's batch script expands the job and node; srun carries the DVM's PMIx variables
  // and starts no MPI plugin of Slurm's.
  std::vector<std::string> want = RelaunchAgent(0, "$SLURMD_NODENAME");
  for (std::string& w : want) {
    if (w == "--jobid=0") w = "--jobid=$SLURM_JOB_ID";
  }
  want.insert(want.end(), {"--mpi=none", "--export=ALL"});
  std::string text;
  for (const std::string& w : want) text += (text.empty() ? "" : " ") + w;
  EXPECT_EQ(RankAgentForScript(), text);
  EXPECT_EQ(RankAgentForScript().find_first_of("'\"\\`"), std::string::npos);
}

TEST(RelaunchWorld, TheLeaderFirstThenOneEntryPerOtherNodeWithItsJobsAgent) {
  auto w = RelaunchWorld("n1", 2, {{"n2", 2, 101}, {"n1", 1, 102}, {"n3", 4, 103}, {"n2", 1, 104}});
  ASSERT_TRUE(w.ok()) << w.status().message();
  const nlohmann::json want = nlohmann::json::array({
      {{"node", "n1"}, {"ranks", 3}},                               // its own 2 and extension 102's GPU
      {{"node", "n2"}, {"ranks", 3}, {"agent", Agent(101, "n2")}},  // 101 and 104: the first one's job
      {{"node", "n3"}, {"ranks", 4}, {"agent", Agent(103, "n3")}},
  });
  EXPECT_EQ(w.value(), want);
}

TEST(RelaunchWorld, NoExtensionsIsTheLeaderAlone) {
  auto w = RelaunchWorld("n1", 2, {});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w.value(), nlohmann::json::array({{{"node", "n1"}, {"ranks", 2}}}));
}

TEST(RelaunchWorld, AnUnknownLeaderOrABadMemberIsRefused) {
  EXPECT_EQ(RelaunchWorld("", 2, {}).status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(RelaunchWorld("n1", 0, {}).status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(RelaunchWorld("n1", 0, {}).status().message().find("did not register its node and ranks"),
            std::string::npos);
  EXPECT_FALSE(RelaunchWorld("n1", 2, {{"", 1, 5}}).ok());
  EXPECT_FALSE(RelaunchWorld("n1", 2, {{"n2", 0, 5}}).ok());
  EXPECT_FALSE(RelaunchWorld("n1", 2, {{"n2", 1, 0}}).ok());
}

}  // namespace
}  // namespace elastic::controller
