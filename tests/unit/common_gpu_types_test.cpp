// The GPU-type list of --elastic-gpu-types (common/include/elastic/common/gpu_types.h) and its
// place in the job's spec.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "elastic/common/gpu_types.h"
#include "elastic/common/job_spec.h"

namespace elastic::contract {
namespace {

const std::vector<std::string> kCluster{"a100", "v100"};
constexpr const char* kFlag = "--elastic-gpu-types";

TEST(GpuTypes, AcceptsKnownTypesInTheirOrder) {
  auto t = ParseGpuTypes("v100,a100", kCluster, kFlag);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t.value(), (std::vector<std::string>{"v100", "a100"}));
  auto one = ParseGpuTypes("a100", kCluster, kFlag);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one.value(), (std::vector<std::string>{"a100"}));
  // Without the cluster's types (slurmctld not reachable at submission) only the syntax counts.
  EXPECT_TRUE(ParseGpuTypes("h100,rtx-6000_a.1", {}, kFlag).ok());
}

struct Bad {
  const char* text;
  const char* message;
};

TEST(GpuTypes, RefusesBadListsWithAMessageThatSaysWhatToDo) {
  const Bad rows[] = {
      {"", "--elastic-gpu-types: empty list; give the GPU types the job may run on, e.g. --elastic-gpu-types=a100,v100"},
      {"a100,", "--elastic-gpu-types: 'a100,' has an empty item; separate the types by single commas, e.g. a100,v100"},
      {",a100", "--elastic-gpu-types: ',a100' has an empty item; separate the types by single commas, e.g. a100,v100"},
      {"a100,,v100", "--elastic-gpu-types: 'a100,,v100' has an empty item; separate the types by single commas, e.g. a100,v100"},
      {"a100,a100", "--elastic-gpu-types: 'a100' is listed twice; give each type once"},
      {"a100,h100", "--elastic-gpu-types: this cluster has no GPU type 'h100'; its types are a100,v100"},
      {"A100", "--elastic-gpu-types: this cluster has no GPU type 'A100'; its types are a100,v100"},
      {"a100 ,v100", "--elastic-gpu-types: 'a100 ' is not a GPU type name (letters, digits, '.', '-' and '_', at most 32 characters)"},
      {"gpu:a100", "--elastic-gpu-types: 'gpu:a100' is not a GPU type name (letters, digits, '.', '-' and '_', at most 32 characters)"},
      {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
       "--elastic-gpu-types: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' is not a GPU type name (letters, digits, '.', '-' and '_', "
       "at most 32 characters)"},
  };
  for (const Bad& row : rows) {
    auto t = ParseGpuTypes(row.text, kCluster, kFlag);
    ASSERT_FALSE(t.ok()) << "accepted: '" << row.text << "'";
    EXPECT_EQ(t.status().kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(t.status().message(), row.message);
  }
}

TEST(GpuTypes, TheJobsOwnTypeMustBeListed) {
  EXPECT_TRUE(CheckOwnGpuType({"a100", "v100"}, "v100", kFlag).ok());
  EXPECT_TRUE(CheckOwnGpuType({}, "", kFlag).ok());  // no list: nothing to check
  Status s = CheckOwnGpuType({"a100"}, "v100", kFlag);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "--elastic-gpu-types=a100 does not contain 'v100', the type of the job's own GPU request "
            "(--gres=gpu:v100:N): add it to the list or request GPUs of a listed type");
  EXPECT_EQ(CheckOwnGpuType({"a100", "v100"}, "", kFlag).message(),
            "--elastic-gpu-types=a100,v100 needs a typed GPU request on one of these types, e.g. --gres=gpu:a100:N "
            "(the job's GPUs are untyped or of several types)");
}

TEST(GpuTypes, TravelInTheSpec) {
  JobSpec spec;
  spec.gpus = {2, 4};
  spec.gpu_types = JoinGpuTypes({"v100", "a100"});
  EXPECT_EQ(spec.ToJson()["gpu_types"], "v100,a100");
  EXPECT_EQ(spec.ToEnvironment().at("ELASTIC_GPU_TYPES"), "v100,a100");
  EXPECT_EQ(JobSpec::FromJson(spec.ToJson()), spec);
  EXPECT_EQ(JobSpec::FromEnvironment(spec.ToEnvironment()), spec);
  EXPECT_EQ(spec.GpuTypes(), (std::vector<std::string>{"v100", "a100"}));
  EXPECT_TRUE(JobSpec{}.GpuTypes().empty());
  // Stored JSON is read tolerantly: empty items are skipped, a non-string is absent.
  EXPECT_EQ(JobSpec::FromJson({{"gpu_types", ",a100,,v100,"}}).GpuTypes(), (std::vector<std::string>{"a100", "v100"}));
  EXPECT_TRUE(JobSpec::FromJson({{"gpu_types", 3}}).GpuTypes().empty());
}

}  // namespace
}  // namespace elastic::contract
