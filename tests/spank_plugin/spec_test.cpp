// The option parser of the SPANK plugin: every malformed value with its exact message, the
// idempotence of callbacks, and the checks across options.
#include <gtest/gtest.h>

#include "spec.h"

namespace elastic::spank {
namespace {

struct BadValue {
  OptionId id;
  const char* value;  // nullptr: no value
  const char* message;
};

// Each row: one malformed value and the message the user sees (after "elastic: ").
const BadValue kBadValues[] = {
    // --elastic-gpus
    {OptionId::kGpus, nullptr, "--elastic-gpus needs a value: --elastic-gpus=MIN:MAX"},
    {OptionId::kGpus, "", "--elastic-gpus: empty value; expected MIN:MAX, e.g. 2:8"},
    {OptionId::kGpus, "4", "--elastic-gpus: '4' is not MIN:MAX (e.g. 2:8)"},
    {OptionId::kGpus, "2:4:8", "--elastic-gpus: '2:4:8' is not MIN:MAX (e.g. 2:8)"},
    {OptionId::kGpus, "2-8", "--elastic-gpus: '2-8' is not MIN:MAX (e.g. 2:8)"},
    {OptionId::kGpus, ":8", "--elastic-gpus MIN is missing"},
    {OptionId::kGpus, "2:", "--elastic-gpus MAX is missing"},
    {OptionId::kGpus, ":", "--elastic-gpus MIN is missing"},
    {OptionId::kGpus, "0:8", "--elastic-gpus MIN must be at least 1"},
    {OptionId::kGpus, "2:0", "--elastic-gpus MAX must be at least 1"},
    {OptionId::kGpus, "8:4", "--elastic-gpus: MIN 8 is greater than MAX 4"},
    {OptionId::kGpus, "-2:8", "--elastic-gpus MIN '-2' is not a positive integer"},
    {OptionId::kGpus, "+2:8", "--elastic-gpus MIN '+2' is not a positive integer"},
    {OptionId::kGpus, "2:8x", "--elastic-gpus MAX '8x' is not a positive integer"},
    {OptionId::kGpus, "two:8", "--elastic-gpus MIN 'two' is not a positive integer"},
    {OptionId::kGpus, " 2:8", "--elastic-gpus MIN ' 2' is not a positive integer"},
    {OptionId::kGpus, "2:8 ", "--elastic-gpus MAX '8 ' is not a positive integer"},
    {OptionId::kGpus, "2.5:8", "--elastic-gpus MIN '2.5' is not a positive integer"},
    {OptionId::kGpus, "0x2:8", "--elastic-gpus MIN '0x2' is not a positive integer"},
    {OptionId::kGpus, "2:100001", "--elastic-gpus MAX '100001' is too large (at most 100000)"},
    {OptionId::kGpus, "1:99999999999999999999999", "--elastic-gpus MAX '99999999999999999999999' is too large (at most 100000)"},
    {OptionId::kGpus, "2:8\n", "--elastic-gpus MAX '8?' is not a positive integer"},
    // --elastic-gpu-step
    {OptionId::kGpuStep, nullptr, "--elastic-gpu-step needs a value: --elastic-gpu-step=N"},
    {OptionId::kGpuStep, "", "--elastic-gpu-step is missing"},
    {OptionId::kGpuStep, "0", "--elastic-gpu-step must be at least 1"},
    {OptionId::kGpuStep, "-1", "--elastic-gpu-step '-1' is not a positive integer"},
    {OptionId::kGpuStep, "2x", "--elastic-gpu-step '2x' is not a positive integer"},
    {OptionId::kGpuStep, "1:2", "--elastic-gpu-step '1:2' is not a positive integer"},
    {OptionId::kGpuStep, "200000", "--elastic-gpu-step '200000' is too large (at most 100000)"},
    // --elastic-batch
    {OptionId::kBatch, "", "--elastic-batch: empty value; expected MIN:MAX, e.g. 256:4096"},
    {OptionId::kBatch, "256", "--elastic-batch: '256' is not MIN:MAX (e.g. 256:4096)"},
    {OptionId::kBatch, "4096:256", "--elastic-batch: MIN 4096 is greater than MAX 256"},
    {OptionId::kBatch, "0:256", "--elastic-batch MIN must be at least 1"},
    {OptionId::kBatch, "256:4k", "--elastic-batch MAX '4k' is not a positive integer"},
    {OptionId::kBatch, "256:2000000000", "--elastic-batch MAX '2000000000' is too large (at most 1000000000)"},
    {OptionId::kBatch, "1e3:4096", "--elastic-batch MIN '1e3' is not a positive integer"},
    // --elastic-local-batch
    {OptionId::kLocalBatch, "", "--elastic-local-batch: empty value; expected MIN:MAX, e.g. 32:256"},
    {OptionId::kLocalBatch, "64:32", "--elastic-local-batch: MIN 64 is greater than MAX 32"},
    {OptionId::kLocalBatch, "32;64", "--elastic-local-batch: '32;64' is not MIN:MAX (e.g. 32:256)"},
    {OptionId::kLocalBatch, "a:b", "--elastic-local-batch MIN 'a' is not a positive integer"},
    // --elastic-lr-scaling
    {OptionId::kLrScaling, nullptr, "--elastic-lr-scaling needs a value: --elastic-lr-scaling=RULE"},
    {OptionId::kLrScaling, "", "--elastic-lr-scaling: '' is not one of none, linear, sqrt or adascale"},
    {OptionId::kLrScaling, "Linear", "--elastic-lr-scaling: 'Linear' is not one of none, linear, sqrt or adascale"},
    {OptionId::kLrScaling, "square-root", "--elastic-lr-scaling: 'square-root' is not one of none, linear, sqrt or adascale"},
    {OptionId::kLrScaling, "sqrt ", "--elastic-lr-scaling: 'sqrt ' is not one of none, linear, sqrt or adascale"},
    // --elastic-model
    {OptionId::kModel, "", "--elastic-model: empty name"},
    {OptionId::kModel, "res net", "--elastic-model: 'res net' may contain only letters, digits, '.', '-' and '_'"},
    {OptionId::kModel, "../../etc/passwd", "--elastic-model: '../../etc/passwd' may contain only letters, digits, '.', '-' and '_'"},
    {OptionId::kModel, "-resnet", "--elastic-model: '-resnet' must start with a letter, digit or '_'"},
    {OptionId::kModel, ".hidden", "--elastic-model: '.hidden' must start with a letter, digit or '_'"},
    {OptionId::kModel, "bert;rm -rf", "--elastic-model: 'bert;rm -rf' may contain only letters, digits, '.', '-' and '_'"},
    {OptionId::kModel, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
     "--elastic-model: name is longer than 64 characters"},
    // --elastic-fuse
    {OptionId::kFuse, nullptr, "--elastic-fuse needs a value: --elastic-fuse=MAX_PER_GPU"},
    {OptionId::kFuse, "", "--elastic-fuse is missing"},
    {OptionId::kFuse, "0", "--elastic-fuse must be at least 1"},
    {OptionId::kFuse, "-4", "--elastic-fuse '-4' is not a positive integer"},
    {OptionId::kFuse, "4x", "--elastic-fuse '4x' is not a positive integer"},
    {OptionId::kFuse, "2:4", "--elastic-fuse '2:4' is not a positive integer"},
    {OptionId::kFuse, "65", "--elastic-fuse '65' is too large (at most 64)"},
    // --elastic-gpu-types (the names against the cluster's types: ValidateTest)
    {OptionId::kGpuTypes, nullptr, "--elastic-gpu-types needs a value: --elastic-gpu-types=TYPE,..."},
    {OptionId::kGpuTypes, "a100,,v100",
     "--elastic-gpu-types: 'a100,,v100' has an empty item; separate the types by single commas, e.g. a100,v100"},
    {OptionId::kGpuTypes, "v100,v100", "--elastic-gpu-types: 'v100' is listed twice; give each type once"},
    // --no-elastic
    {OptionId::kNoElastic, "yes", "--no-elastic takes no value"},
    // --elastic-extension
    {OptionId::kExtension, "12", "--elastic-extension: '12' is not PARENT:GROUP"},
    {OptionId::kExtension, "0:1", "--elastic-extension PARENT must be at least 1"},
    {OptionId::kExtension, "12:x", "--elastic-extension GROUP 'x' is not a positive integer"},
};

class BadValueTest : public ::testing::TestWithParam<BadValue> {};

TEST_P(BadValueTest, RefusedWithItsMessage) {
  const BadValue& row = GetParam();
  ElasticSpec spec;
  Status s = SetOption(spec, row.id, row.value);
  ASSERT_FALSE(s.ok()) << "accepted: " << (row.value ? row.value : "(null)");
  EXPECT_EQ(s.kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(s.message(), row.message);
}

INSTANTIATE_TEST_SUITE_P(Table, BadValueTest, ::testing::ValuesIn(kBadValues));

TEST(SpecTest, TableHasAtLeastFortyMalformedValues) { EXPECT_GE(std::size(kBadValues), 40u); }

TEST(SpecTest, GoodValuesAreStored) {
  ElasticSpec spec;
  ASSERT_TRUE(SetOption(spec, OptionId::kGpus, "2:16").ok());
  ASSERT_TRUE(SetOption(spec, OptionId::kGpuStep, "2").ok());
  ASSERT_TRUE(SetOption(spec, OptionId::kBatch, "256:4096").ok());
  ASSERT_TRUE(SetOption(spec, OptionId::kLocalBatch, "32:256").ok());
  ASSERT_TRUE(SetOption(spec, OptionId::kLrScaling, "adascale").ok());
  ASSERT_TRUE(SetOption(spec, OptionId::kModel, "resnet-50_v1.5").ok());
  EXPECT_EQ(*spec.gpus, (Range{2, 16}));
  EXPECT_EQ(*spec.gpu_step, 2);
  EXPECT_EQ(*spec.batch, (Range{256, 4096}));
  EXPECT_EQ(*spec.local_batch, (Range{32, 256}));
  EXPECT_EQ(*spec.lr_scaling, "adascale");
  EXPECT_EQ(*spec.model, "resnet-50_v1.5");
  EXPECT_TRUE(spec.Elastic());
  EXPECT_EQ(Describe(spec), "gpus=2:16 step=2 batch=256:4096 local_batch=32:256 lr=adascale model=resnet-50_v1.5");
}

TEST(SpecTest, SameValueTwiceIsAcceptedDifferentValueIsRefused) {
  ElasticSpec spec;
  ASSERT_TRUE(SetOption(spec, OptionId::kGpus, "2:8").ok());
  EXPECT_TRUE(SetOption(spec, OptionId::kGpus, "2:8").ok());  // Slurm may call a callback twice
  Status s = SetOption(spec, OptionId::kGpus, "4:8");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "--elastic-gpus is given twice with different values (2:8 and 4:8); give it once (an #SBATCH line and "
            "the command line count as two)");
  EXPECT_EQ(*spec.gpus, (Range{2, 8}));  // the first value stays

  ASSERT_TRUE(SetOption(spec, OptionId::kLrScaling, "sqrt").ok());
  s = SetOption(spec, OptionId::kLrScaling, "linear");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "--elastic-lr-scaling is given twice with different values (sqrt and linear); give it once (an #SBATCH "
            "line and the command line count as two)");
}

struct CrossCase {
  std::vector<std::pair<OptionId, const char*>> options;
  const char* message;  // nullptr: valid
};

SiteConfig Site() {
  SiteConfig site;
  site.controller = config::HostPort{"127.0.0.1", 6820};
  site.max_gpus = 32;
  site.max_batch = 65536;
  site.default_lr_scaling = "sqrt";
  return site;
}

TEST(ValidateTest, ChecksAcrossOptionsAndSiteLimits) {
  const CrossCase cases[] = {
      {{{OptionId::kGpus, "2:8"}}, nullptr},
      {{{OptionId::kGpus, "2:64"}}, "--elastic-gpus: MAX 64 exceeds this cluster's limit of 32 GPUs per elastic job"},
      {{{OptionId::kGpus, "2:8"}, {OptionId::kGpuStep, "3"}},
       "--elastic-gpu-step 3 must divide --elastic-gpus MIN 2 and MAX 8"},
      {{{OptionId::kGpus, "4:10"}, {OptionId::kGpuStep, "4"}},
       "--elastic-gpu-step 4 must divide --elastic-gpus MIN 4 and MAX 10"},
      {{{OptionId::kGpus, "4:16"}, {OptionId::kGpuStep, "4"}}, nullptr},
      {{{OptionId::kBatch, "256:1024"}}, "--elastic-batch needs --elastic-gpus=MIN:MAX, which makes the job elastic"},
      {{{OptionId::kGpuStep, "2"}}, "--elastic-gpu-step needs --elastic-gpus=MIN:MAX, which makes the job elastic"},
      {{{OptionId::kLrScaling, "sqrt"}}, "--elastic-lr-scaling needs --elastic-gpus=MIN:MAX, which makes the job elastic"},
      {{{OptionId::kModel, "bert"}}, "--elastic-model needs --elastic-gpus=MIN:MAX, which makes the job elastic"},
      {{{OptionId::kLocalBatch, "8:64"}}, "--elastic-local-batch needs --elastic-gpus=MIN:MAX, which makes the job elastic"},
      {{{OptionId::kGpus, "2:8"}, {OptionId::kBatch, "256:131072"}},
       "--elastic-batch: MAX 131072 exceeds this cluster's limit of 65536"},
      {{{OptionId::kGpus, "4:8"}, {OptionId::kBatch, "64:100"}, {OptionId::kLocalBatch, "32:64"}},
       "the smallest global batch the job can run (--elastic-local-batch MIN 32 x --elastic-gpus MIN 4 = 128) exceeds "
       "--elastic-batch MAX 100"},
      {{{OptionId::kGpus, "2:8"}, {OptionId::kBatch, "64:1024"}, {OptionId::kLocalBatch, "32:64"}}, nullptr},
      // --elastic-fuse: a fused sweep's GPUs each train whole trials at their own batch size
      {{{OptionId::kGpus, "1:4"}, {OptionId::kFuse, "4"}}, nullptr},
      {{{OptionId::kFuse, "4"}}, "--elastic-fuse needs --elastic-gpus=MIN:MAX, which makes the job elastic"},
      {{{OptionId::kGpus, "2:8"}, {OptionId::kGpuStep, "2"}, {OptionId::kFuse, "4"}},
       "--elastic-fuse cannot be combined with --elastic-gpu-step 2: each GPU of a fused sweep trains whole trials; "
       "drop --elastic-gpu-step"},
      {{{OptionId::kGpus, "1:4"}, {OptionId::kBatch, "64:256"}, {OptionId::kFuse, "4"}},
       "--elastic-fuse cannot be combined with --elastic-batch: each trial of a fused sweep keeps its own batch size; "
       "drop --elastic-batch"},
      {{{OptionId::kGpus, "1:4"}, {OptionId::kLocalBatch, "32:64"}, {OptionId::kFuse, "2"}},
       "--elastic-fuse cannot be combined with --elastic-local-batch: each trial of a fused sweep keeps its own batch "
       "size; drop --elastic-local-batch"},
      {{{OptionId::kGpus, "1:64"}, {OptionId::kFuse, "4"}},
       "--elastic-gpus: MAX 64 exceeds this cluster's limit of 32 GPUs per elastic job"},
      {{{OptionId::kFuse, "4"}, {OptionId::kNoElastic, nullptr}}, nullptr},
      // --no-elastic turns everything off, whatever else is given
      {{{OptionId::kGpus, "2:64"}, {OptionId::kNoElastic, nullptr}}, nullptr},
      {{{OptionId::kBatch, "1:2"}, {OptionId::kNoElastic, nullptr}}, nullptr},
      // as srun inside the batch job sees it: the flag's absent value as Slurm writes it
      {{{OptionId::kGpus, "2:8"}, {OptionId::kNoElastic, "(null)"}}, nullptr},
  };
  for (const auto& c : cases) {
    ElasticSpec spec;
    for (const auto& [id, value] : c.options) ASSERT_TRUE(SetOption(spec, id, value).ok());
    Status s = Validate(spec, Site());
    if (c.message == nullptr) {
      EXPECT_TRUE(s.ok()) << s.message();
    } else {
      EXPECT_FALSE(s.ok()) << "accepted: " << Describe(spec);
      EXPECT_EQ(s.message(), c.message);
    }
  }
}

TEST(ValidateTest, FillsSiteDefaults) {
  ElasticSpec spec;
  ASSERT_TRUE(SetOption(spec, OptionId::kGpus, "2:8").ok());
  ASSERT_TRUE(Validate(spec, Site()).ok());
  EXPECT_EQ(*spec.lr_scaling, "sqrt");
  EXPECT_EQ(*spec.gpu_step, 1);
  auto env = SpecEnvironment(spec);
  EXPECT_EQ(env.at("ELASTIC_GPUS_MIN"), "2");
  EXPECT_EQ(env.at("ELASTIC_GPUS_MAX"), "8");
  EXPECT_EQ(env.at("ELASTIC_LR_SCALING"), "sqrt");
  EXPECT_EQ(env.at("ELASTIC_SPEC_VERSION"), "1");
  EXPECT_EQ(env.count("ELASTIC_BATCH_MIN"), 0u);
}

TEST(CheckBaseGpusTest, MinMustEqualTheAllocation) {
  ElasticSpec spec;
  ASSERT_TRUE(SetOption(spec, OptionId::kGpus, "4:8").ok());
  EXPECT_TRUE(CheckBaseGpus(spec, 4).ok());
  Status s = CheckBaseGpus(spec, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "--elastic-gpus MIN is 4 but the job was allocated 2 GPUs: MIN must equal the job's own GPU request "
            "(--gpus, --gres=gpu or --gpus-per-node)");
  EXPECT_EQ(CheckBaseGpus(spec, 1).message(),
            "--elastic-gpus MIN is 4 but the job was allocated 1 GPU: MIN must equal the job's own GPU request "
            "(--gpus, --gres=gpu or --gpus-per-node)");
  ElasticSpec rigid;
  EXPECT_TRUE(CheckBaseGpus(rigid, 3).ok());
}

TEST(CheckFusedArrayTest, OnlyArrayJobsFuse) {
  ElasticSpec spec;
  ASSERT_TRUE(SetOption(spec, OptionId::kGpus, "1:4").ok());
  ASSERT_TRUE(SetOption(spec, OptionId::kFuse, "4").ok());
  ASSERT_TRUE(Validate(spec, Site()).ok());
  EXPECT_TRUE(CheckFusedArray(spec, true).ok());
  Status s = CheckFusedArray(spec, false);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--elastic-fuse=4 is for job arrays, whose tasks are the sweep's trials: submit with --array (e.g. sbatch "
            "--array=0-7 --elastic-fuse=4 ...), or drop --elastic-fuse");
  // Not fused, or not elastic at all: nothing to check.
  ElasticSpec plain;
  ASSERT_TRUE(SetOption(plain, OptionId::kGpus, "1:4").ok());
  EXPECT_TRUE(CheckFusedArray(plain, false).ok());
  ASSERT_TRUE(SetOption(spec, OptionId::kNoElastic, nullptr).ok());
  EXPECT_TRUE(CheckFusedArray(spec, false).ok());
}

TEST(CheckFusedArrayTest, TheSpecCarriesTheWidth) {
  ElasticSpec spec;
  ASSERT_TRUE(SetOption(spec, OptionId::kGpus, "1:4").ok());
  ASSERT_TRUE(SetOption(spec, OptionId::kFuse, "8").ok());
  EXPECT_TRUE(SetOption(spec, OptionId::kFuse, "8").ok());  // the same value twice
  EXPECT_EQ(SetOption(spec, OptionId::kFuse, "4").message(),
            "--elastic-fuse is given twice with different values (8 and 4); give it once (an #SBATCH line and the "
            "command line count as two)");
  ASSERT_TRUE(Validate(spec, Site()).ok());
  EXPECT_EQ(Describe(spec), "gpus=1:4 step=1 lr=sqrt fuse=8");
  EXPECT_EQ(ToJobSpec(spec).fuse_max_per_gpu, 8);
  EXPECT_EQ(SpecEnvironment(spec).at("ELASTIC_FUSE_MAX_PER_GPU"), "8");
  EXPECT_TRUE(spec.AnyElasticOption());
}

TEST(GpuTypesTest, NamesAreCheckedAgainstTheClusterAndTheJobsOwnType) {
  ElasticSpec spec;
  ASSERT_TRUE(SetOption(spec, OptionId::kGpus, "2:4").ok());
  ASSERT_TRUE(SetOption(spec, OptionId::kGpuTypes, "a100,v100").ok());
  EXPECT_EQ(*spec.gpu_types, (std::vector<std::string>{"a100", "v100"}));
  EXPECT_TRUE(Validate(spec, Site(), {"a100", "v100", "t4"}).ok());
  EXPECT_EQ(Describe(spec), "gpus=2:4 step=1 lr=sqrt gpu_types=a100,v100");
  EXPECT_EQ(ToJobSpec(spec).ToJson()["gpu_types"], "a100,v100");
  EXPECT_EQ(SpecEnvironment(spec).at("ELASTIC_GPU_TYPES"), "a100,v100");
  Status unknown = Validate(spec, Site(), {"a100", "t4"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.message(), "--elastic-gpu-types: this cluster has no GPU type 'v100'; its types are a100,t4");
  EXPECT_TRUE(CheckOwnGpuType(spec, "v100").ok());
  EXPECT_EQ(CheckOwnGpuType(spec, "t4").message(),
            "--elastic-gpu-types=a100,v100 does not contain 't4', the type of the job's own GPU request "
            "(--gres=gpu:t4:N): add it to the list or request GPUs of a listed type");
  // The list needs an elastic job.
  ElasticSpec alone;
  ASSERT_TRUE(SetOption(alone, OptionId::kGpuTypes, "a100").ok());
  EXPECT_EQ(Validate(alone, Site()).message(), "--elastic-gpu-types needs --elastic-gpus=MIN:MAX, which makes the job elastic");
  EXPECT_TRUE(CheckOwnGpuType(alone, "v100").ok());  // not elastic: nothing to check
}

TEST(OptionsTest, EveryHelpTextIsPrefixed) {
  for (const auto& o : Options()) {
    EXPECT_EQ(std::string(o.usage).rfind("[elastic] ", 0), 0u) << o.name;
    EXPECT_EQ(Info(o.id).name, o.name);
  }
}

}  // namespace
}  // namespace elastic::spank
