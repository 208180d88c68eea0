// The group directory of ranks the launcher does not start itself (elastic_mpi/launch/group_dir.h):
// the launcher's environment as the rank shim adopts it, and signals through the recorded pids.
#include "group_dir.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace {

std::string Host() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}


class GroupDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/elastic-group-dir-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    dir_ = base_ + "/group.1";
  }
  void TearDown() override {
    elastic::launch::RemoveGroupDir(dir_);
    rmdir(base_.c_str());
  }
  std::string base_;
  std::string dir_;
};

std::string Get(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "<unset>" : v;
}

TEST_F(GroupDirTest, TheShimAdoptsTheLaunchersEnvironmentAndKeepsTheDvmsOwn) {
  setenv("ELASTIC_GD_KEPT", "launcher", 1);
  setenv("ELASTIC_GD_UNSET", "stale", 1);
  setenv("SLURM_STEP_ID", "3", 1);
  setenv("OMPI_MCA_gd_from_launcher", "lo", 1);
  setenv("PMIX_GD_SERVER_URI", "the launcher's srun step", 1);  // Slurm's PMIx, the launcher's alone
  ASSERT_TRUE(elastic::launch::WriteGroupDir(
      dir_, {"ELASTIC_GD_NEW=a=b\nsecond line", "ELASTIC_GD_UNSET", "ELASTIC_GD_KEPT=changed"}));
  struct stat st {};
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // What the DVM's daemon gives the rank: its identity and the DVM's own environment.
  setenv("PMIX_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  setenv("ELASTIC_GD_FROM_DVM", "leader's", 1);
  setenv("ELASTIC_GD_KEPT", "dvm", 1);
  unsetenv("OMPI_MCA_gd_from_launcher");
  unsetenv("PMIX_GD_SERVER_URI");
  ASSERT_TRUE(elastic::launch::AdoptGroupDir(dir_));
  EXPECT_EQ(Get("PMIX_GD_SERVER_URI"), "<unset>");   // not the DVM's: never taken
  EXPECT_EQ(Get("ELASTIC_GD_NEW"), "a=b\nsecond line");
  EXPECT_EQ(Get("ELASTIC_GD_KEPT"), "changed");
  EXPECT_EQ(Get("ELASTIC_GD_UNSET"), "<unset>");
  EXPECT_EQ(Get("ELASTIC_GD_FROM_DVM"), "<unset>");  // not the launcher's: gone
  EXPECT_EQ(Get("SLURM_STEP_ID"), "<unset>");        // never carried to ranks
  EXPECT_EQ(Get("PMIX_RANK"), "1");                  // the DVM's, kept
  EXPECT_EQ(Get("OMPI_COMM_WORLD_LOCAL_RANK"), "1");
  EXPECT_EQ(Get("OMPI_MCA_gd_from_launcher"), "lo");  // the launcher's Open MPI setting, carried
  // The rank's pid is recorded, with its host.
  EXPECT_TRUE(std::ifstream(dir_ + "/" + std::to_string(getpid()) + "@" + Host()).good());
  unsetenv("PMIX_RANK");
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("ELASTIC_GD_NEW");
  unsetenv("ELASTIC_GD_KEPT");
}

TEST_F(GroupDirTest, ARankOnAnotherHostKeepsWhatBelongsToItsNode) {
  // The leader's launcher, on its node: its job, devices and scratch, and the world's settings.
  setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
  setenv("SLURM_JOB_ID", "100", 1);
  setenv("TMPDIR", "/tmp/leader", 1);
  setenv("ELASTIC_GD_WORLD", "w", 1);
  ASSERT_TRUE(elastic::launch::WriteGroupDir(dir_, {}));
  // A rank of a relaunched world on another node, started there through the agent of the job
  // that holds that node: its own job and devices, no TMPDIR.
  std::ofstream(dir_ + "/host", std::ios::trunc) << "not-" << Host() << "\n";
  setenv("CUDA_VISIBLE_DEVICES", "2", 1);
  setenv("SLURM_JOB_ID", "200", 1);
  unsetenv("TMPDIR");
  unsetenv("ELASTIC_GD_WORLD");
  ASSERT_TRUE(elastic::launch::AdoptGroupDir(dir_));
  EXPECT_EQ(Get("CUDA_VISIBLE_DEVICES"), "2");
  EXPECT_EQ(Get("SLURM_JOB_ID"), "200");
  EXPECT_EQ(Get("TMPDIR"), "<unset>");
  EXPECT_EQ(Get("ELASTIC_GD_WORLD"), "w");  // the world's settings come from the launcher
  // On the launcher's own host the group's values are taken, as for every rank before relaunches.
  std::ofstream(dir_ + "/host", std::ios::trunc) << Host() << "\n";
  ASSERT_TRUE(elastic::launch::AdoptGroupDir(dir_));
  EXPECT_EQ(Get("CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(Get("SLURM_JOB_ID"), "100");
  EXPECT_EQ(Get("TMPDIR"), "/tmp/leader");
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID", "TMPDIR", "ELASTIC_GD_WORLD"}) unsetenv(name);
}

TEST_F(GroupDirTest, SignalsReachTheRecordedRanksOfThisHostOnly) {
  ASSERT_TRUE(elastic::launch::WriteGroupDir(dir_, {}));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  const pid_t elsewhere = fork();  // the same pid on another host (a relaunched world's rank there)
  ASSERT_GE(elsewhere, 0);
  if (elsewhere == 0) {
    pause();
    _exit(0);
  }
  std::ofstream(dir_ + "/" + std::to_string(child) + "@" + Host()).flush();
  std::ofstream(dir_ + "/" + std::to_string(elsewhere) + "@not-" + Host()).flush();
  std::ofstream(dir_ + "/" + std::to_string(elsewhere)).flush();  // no host: not signalled either
  elastic::launch::SignalGroup(dir_, SIGUSR2);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int other = 0;
  EXPECT_EQ(waitpid(elsewhere, &other, WNOHANG), 0) << "a rank recorded for another host was signalled";
  kill(elsewhere, SIGKILL);
  waitpid(elsewhere, &other, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGUSR2);
}

TEST_F(GroupDirTest, AMissingDirectoryIsAnError) {
  EXPECT_FALSE(elastic::launch::AdoptGroupDir(base_ + "/no-such-group"));
}

}  // namespace
