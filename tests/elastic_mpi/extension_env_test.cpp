#include "extension_env.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace elastic::launch {
namespace {

// environ-style array of the given entries (kept alive by the caller's vector of strings).
std::vector<char*> Environ(std::vector<std::string>& entries) {
  std::vector<char*> out;
  for (auto& e : entries) out.push_back(e.data());
  out.push_back(nullptr);
  return out;
}

TEST(ExtensionEnv, TheJobsOwnButSlurmsAndTheNodesAndWhatTheUserNames) {
  std::vector<std::string> entries{"OPENBLAS_CORETYPE=Haswell", "NCCL_SOCKET_IFNAME=ib0", "PATH=/usr/bin:/bin",
                                   "MARK=a=b", "SLURM_JOB_ID=12", "CUDA_VISIBLE_DEVICES=0,1", "TMPDIR=/tmp/job12",
                                   "ELASTIC_JOIN_TOKEN=0123456789abcdef0123456789abcdef", "OMPI_MCA_btl=self,tcp",
                                   "PMIX_RANK=0", "noequals", "=novalue", "EMPTY="};
  auto env = Environ(entries);
  auto got = ExtensionEnvironment(env.data(), {"TMPDIR", "SLURM_JOB_ID", "ELASTIC_JOIN_TOKEN"});
  EXPECT_EQ(got.vars, (nlohmann::json{{"OPENBLAS_CORETYPE", "Haswell"}, {"NCCL_SOCKET_IFNAME", "ib0"},
                                       {"PATH", "/usr/bin:/bin"}, {"MARK", "a=b"}, {"TMPDIR", "/tmp/job12"},
                                       {"OMPI_MCA_btl", "self,tcp"}, {"EMPTY", ""}}));
  EXPECT_TRUE(got.left_out.empty());
}

TEST(ExtensionEnv, TooLargeLeavesTheLargestOutAndSaysWhich) {
  std::vector<std::string> entries{"SMALL=1", "BIG=" + std::string(600, 'x'), "HUGE=" + std::string(900, 'y'),
                                   "MID=" + std::string(100, 'z')};
  auto env = Environ(entries);
  auto got = ExtensionEnvironment(env.data(), {}, 700);
  EXPECT_EQ(got.left_out, (std::vector<std::string>{"HUGE", "BIG"}));
  EXPECT_EQ(got.vars, (nlohmann::json{{"SMALL", "1"}, {"MID", std::string(100, 'z')}}));
  // Within the limit: nothing left out.
  got = ExtensionEnvironment(env.data(), {}, 2000);
  EXPECT_TRUE(got.left_out.empty());
  EXPECT_EQ(got.vars.size(), 4u);
}

}  // namespace
}  // namespace elastic::launch
