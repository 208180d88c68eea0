// GPUs from Slurm's text forms: node and job GRES, TRES, and a running job's fallbacks.
#include <gtest/gtest.h>

#include "elastic/common/gres.h"

namespace elastic::slurm_text {
namespace {

using Gpus = std::pair<std::string, int>;

TEST(Gres, NodeAndJobGres) {
  EXPECT_EQ(ParseGpuGres("gpu:a100:4(S:0)"), Gpus("a100", 4));
  EXPECT_EQ(ParseGpuGres("gpu:a100:2(IDX:0-1)"), Gpus("a100", 2));
  EXPECT_EQ(ParseGpuGres("gpu:4"), Gpus("", 4));
  EXPECT_EQ(ParseGpuGres("gpu:a100:2,gpu:v100:2"), Gpus("mixed", 4));
  EXPECT_EQ(ParseGpuGres("shard:8,gpu:a100:1"), Gpus("a100", 1));
  EXPECT_EQ(ParseGpuGres("(null)"), Gpus("", 0));
  EXPECT_EQ(ParseGpuGres(""), Gpus("", 0));
  EXPECT_EQ(ParseGpuGres("gpu:a100:-3"), Gpus("a100", 0));
}

TEST(Gres, PerTypeForNodesWithSeveralTypes) {
  using List = std::vector<Gpus>;
  EXPECT_EQ(ParseGpuGresByType("gpu:a100:2(S:0),gpu:v100:2(S:1)"), List({{"a100", 2}, {"v100", 2}}));
  // GresUsed: a type with none in use still appears; repeated types add up.
  EXPECT_EQ(ParseGpuGresByType("gpu:a100:1(IDX:0),gpu:v100:0(IDX:N/A)"), List({{"a100", 1}, {"v100", 0}}));
  EXPECT_EQ(ParseGpuGresByType("gpu:a100:1,shard:4,gpu:a100:2"), List({{"a100", 3}}));
  EXPECT_EQ(ParseGpuGresByType("gpu:4"), List({{"", 4}}));
  EXPECT_TRUE(ParseGpuGresByType("(null)").empty());
}

TEST(Gres, Tres) {
  EXPECT_EQ(ParseGpuTres("cpu=1,node=1,billing=1,gres/gpu=2,gres/gpu:a100=2"), Gpus("a100", 2));
  EXPECT_EQ(ParseGpuTres("cpu=4,gres/gpu=4"), Gpus("", 4));
  EXPECT_EQ(ParseGpuTres("gres/gpu=4,gres/gpu:a100=2,gres/gpu:v100=2"), Gpus("", 4));  // mixed
  EXPECT_EQ(ParseGpuTres("cpu=4,mem=1G"), Gpus("", 0));
  EXPECT_EQ(ParseGpuTres(""), Gpus("", 0));
}

TEST(Gres, TheTypeARequestNames) {
  EXPECT_EQ(RequestedGpuType({"gres:gpu:v100:2", "", "", ""}), "v100");
  EXPECT_EQ(RequestedGpuType({"gres:gpu:2", "", "", ""}), "");  // --gres=gpu:2: untyped
  EXPECT_EQ(RequestedGpuType({"gres/gpu:a100", "", "", ""}), "a100");  // --gres=gpu:a100 (one)
  EXPECT_EQ(RequestedGpuType({"", "gres:gpu:a100:4", "", ""}), "a100");  // --gpus=a100:4
  EXPECT_EQ(RequestedGpuType({"", "", "", "gres/gpu:v100=1"}), "v100");  // --gpus-per-task
  EXPECT_EQ(RequestedGpuType({"gres:gpu:1;gres:shard:2", "", "", ""}), "");
  EXPECT_EQ(RequestedGpuType({"gres:gpu:a100:1", "gres:gpu:v100:2", "", ""}), "mixed");
  EXPECT_EQ(RequestedGpuType({}), "");
}

TEST(Gres, TheGpusARequestAsksForOnEachNode) {
  EXPECT_EQ(RequestedGpusPerNode("gres:gpu:v100:2"), 2);     // --gres=gpu:v100:2, Slurm 22.05
  EXPECT_EQ(RequestedGpusPerNode("gres/gpu:v100:2"), 2);     // the same, Slurm 24.11
  EXPECT_EQ(RequestedGpusPerNode("gres/gpu=4"), 4);          // --gpus-per-node=4
  EXPECT_EQ(RequestedGpusPerNode("gres/gpu:a100=3"), 3);     // --gpus-per-node=a100:3
  EXPECT_EQ(RequestedGpusPerNode("gres:gpu:1;gres:shard:2"), 1);
  EXPECT_EQ(RequestedGpusPerNode("gres/gpu:a100"), 1);       // --gres=gpu:a100: one each
  EXPECT_EQ(RequestedGpusPerNode("gres:gpu"), 1);            // --gres=gpu
  EXPECT_EQ(RequestedGpusPerNode("gres/shard:2"), 0);        // no GPU
  EXPECT_EQ(RequestedGpusPerNode(""), 0);                    // --gpus=N: not per node
}

TEST(Gres, RunningJobFallsBackToGresThenRequest) {
  // The normal case: allocated TRES.
  EXPECT_EQ(RunningJobGpus("cpu=1,gres/gpu=2,gres/gpu:a100=2", "gpu:a100:2(IDX:0-1)", "gres:gpu:a100:2", 1),
            Gpus("a100", 2));
  // Right after a restart of slurmctld: no TRES yet, the GRES in use tells.
  EXPECT_EQ(RunningJobGpus("", "gpu:a100:2(IDX:0-1)", "gres:gpu:a100:2", 1), Gpus("a100", 2));
  // Neither: the request per node times the nodes.
  EXPECT_EQ(RunningJobGpus("", "", "gres:gpu:v100:3", 2), Gpus("v100", 6));
  EXPECT_EQ(RunningJobGpus("", "gpu:a100:1,gpu:v100:1", "", 1), Gpus("", 2));  // mixed types
  EXPECT_EQ(RunningJobGpus("cpu=2", "", "", 1), Gpus("", 0));                   // no GPUs at all
}

}  // namespace
}  // namespace elastic::slurm_text
