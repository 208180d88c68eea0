// The job contract of common/: the spec's JSON and variables, the extension link, join tokens
// and the table of ELASTIC_* variables.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "elastic/common/job_contract.h"

namespace elastic::contract {
namespace {

JobSpec FullSpec() {
  JobSpec spec;
  spec.gpus = {2, 8};
  spec.gpu_step = 2;
  spec.batch = {256, 4096};
  spec.local_batch = {32, 256};
  spec.lr_scaling = "sqrt";
  spec.model = "resnet-50";
  return spec;
}

TEST(JobSpec, JsonHasExactlyTheRegisterKeys) {
  nlohmann::json want{{"gpus_min", 2},       {"gpus_max", 8},          {"gpu_step", 2},
                      {"batch_min", 256},    {"batch_max", 4096},      {"local_batch_min", 32},
                      {"local_batch_max", 256}, {"lr_scaling", "sqrt"}, {"model", "resnet-50"}};
  EXPECT_EQ(FullSpec().ToJson(), want);
  EXPECT_EQ(JobSpec{}.ToJson(), nlohmann::json::object());  // absent fields are absent keys
}

TEST(JobSpec, JsonRoundTrip) {
  EXPECT_EQ(JobSpec::FromJson(FullSpec().ToJson()), FullSpec());
  JobSpec partial;
  partial.gpus.min = 4;
  partial.lr_scaling = "none";
  EXPECT_EQ(JobSpec::FromJson(partial.ToJson()), partial);
  EXPECT_EQ(JobSpec::FromJson(JobSpec{}.ToJson()), JobSpec{});
}

TEST(JobSpec, FromJsonIsTolerant) {
  // Wrong types and unknown keys are absent values, never errors.
  auto spec = JobSpec::FromJson({{"gpus_min", "2"}, {"gpus_max", 8.5}, {"gpu_step", nullptr}, {"batch_min", 64},
                                 {"lr_scaling", 3}, {"model", {1, 2}}, {"colour", "blue"}});
  EXPECT_EQ(spec.gpus, (Bounds{std::nullopt, std::nullopt}));
  EXPECT_EQ(spec.gpu_step, std::nullopt);
  EXPECT_EQ(spec.batch, (Bounds{64, std::nullopt}));
  EXPECT_EQ(spec.lr_scaling, std::nullopt);
  EXPECT_EQ(spec.model, std::nullopt);
  for (const nlohmann::json& not_object : {nlohmann::json(), nlohmann::json(3), nlohmann::json::array({1})}) {
    EXPECT_EQ(JobSpec::FromJson(not_object), JobSpec{}) << not_object;
  }
  EXPECT_EQ(JobSpec::FromJson({{"batch_max", 18446744073709551615ull}}).batch.max, std::nullopt);
}

TEST(JobSpec, DefaultsOfTheAccessors) {
  JobSpec empty;
  EXPECT_EQ(empty.GpusMax(4), 4);  // the base size
  EXPECT_EQ(empty.GpuStep(), 1);
  EXPECT_EQ(empty.LrScaling(), "none");
  JobSpec spec = FullSpec();
  EXPECT_EQ(spec.GpusMax(4), 8);
  EXPECT_EQ(spec.GpuStep(), 2);
  EXPECT_EQ(spec.LrScaling(), "sqrt");
  spec.gpu_step = 0;
  EXPECT_EQ(spec.GpuStep(), 1);
  spec.gpu_step = -3;
  EXPECT_EQ(spec.GpuStep(), 1);
}

TEST(JobSpec, EnvironmentHasOneVariablePerPresentField) {
  std::map<std::string, std::string> want{
      {"ELASTIC_SPEC_VERSION", "1"},    {"ELASTIC_GPUS_MIN", "2"},          {"ELASTIC_GPUS_MAX", "8"},
      {"ELASTIC_GPU_STEP", "2"},        {"ELASTIC_BATCH_MIN", "256"},       {"ELASTIC_BATCH_MAX", "4096"},
      {"ELASTIC_LOCAL_BATCH_MIN", "32"}, {"ELASTIC_LOCAL_BATCH_MAX", "256"}, {"ELASTIC_LR_SCALING", "sqrt"},
      {"ELASTIC_MODEL", "resnet-50"}};
  EXPECT_EQ(FullSpec().ToEnvironment(), want);
  EXPECT_EQ(JobSpec{}.ToEnvironment(), (std::map<std::string, std::string>{{"ELASTIC_SPEC_VERSION", "1"}}));
}

TEST(JobSpec, RoundTripThroughJsonAndEnvironment) {
  // The plugin's spec -> elasticd's JSON -> an extension's variables -> the spec again.
  const JobSpec spec = FullSpec();
  EXPECT_EQ(JobSpec::FromEnvironment(JobSpec::FromJson(spec.ToJson()).ToEnvironment()), spec);
  JobSpec partial;
  partial.batch = {64, 1024};
  EXPECT_EQ(JobSpec::FromEnvironment(partial.ToEnvironment()), partial);
  EXPECT_EQ(JobSpec::FromJson(JobSpec::FromEnvironment(partial.ToEnvironment()).ToJson()), partial);
}

TEST(JobSpec, FusedSweepTravelsAsOneKeyAndOneVariable) {
  JobSpec spec;
  spec.gpus = {1, 4};
  spec.fuse_max_per_gpu = 4;
  EXPECT_EQ(spec.ToJson(), (nlohmann::json{{"gpus_min", 1}, {"gpus_max", 4}, {"fuse_max_per_gpu", 4}}));
  EXPECT_EQ(spec.ToEnvironment().at("ELASTIC_FUSE_MAX_PER_GPU"), "4");
  EXPECT_EQ(JobSpec::FromEnvironment(JobSpec::FromJson(spec.ToJson()).ToEnvironment()), spec);
  EXPECT_TRUE(spec.Fused());
  EXPECT_FALSE(FullSpec().Fused());
  EXPECT_FALSE(JobSpec::FromJson({{"fuse_max_per_gpu", "4"}}).Fused());  // not an integer: absent
  spec.fuse_max_per_gpu = 0;
  EXPECT_FALSE(spec.Fused());
}

TEST(JobSpec, FromEnvironmentIsTolerant) {
  auto spec = JobSpec::FromEnvironment({{"ELASTIC_GPUS_MIN", "2x"},
                                        {"ELASTIC_GPUS_MAX", ""},
                                        {"ELASTIC_BATCH_MIN", "-5"},
                                        {"ELASTIC_BATCH_MAX", "99999999999999999999"},
                                        {"ELASTIC_LR_SCALING", "linear"},
                                        {"ELASTIC_LOG_LEVEL", "debug"}});
  EXPECT_EQ(spec.gpus, Bounds{});
  EXPECT_EQ(spec.batch, (Bounds{-5, std::nullopt}));
  EXPECT_EQ(spec.lr_scaling, "linear");
  EXPECT_EQ(spec.model, std::nullopt);
}

TEST(ExtensionLink, FormatsBothForms) {
  ExtensionLink link{4711, 3};
  EXPECT_EQ(link.AdminComment(), "elastic-ext parent=4711 group=3");
  EXPECT_EQ(link.JobName(), "elastic-ext:4711:3");
  EXPECT_EQ(ExtensionLink::ParseAdminComment(link.AdminComment()), link);
  EXPECT_EQ(ExtensionLink::ParseJobName(link.JobName()), link);
  ExtensionLink big{4294967295u, 1000000};
  EXPECT_EQ(ExtensionLink::ParseAdminComment(big.AdminComment()), big);
  EXPECT_EQ(ExtensionLink::ParseJobName(big.JobName()), big);
}

TEST(ExtensionLink, ParsesOnlyTheExactForms) {
  struct Case {
    const char* text;
    bool ok;
  };
  const Case comments[] = {
      {"elastic-ext parent=4711 group=3", true},   {"elastic-ext parent=1 group=0", true},
      {"elastic-ext parent=4711", false},          {"elastic-ext parent=0 group=1", false},
      {"elastic-ext parent=47x1 group=1", false},  {"elastic-ext parent=4711 group=1 extra", false},
      {"elastic-ext  parent=4711 group=1", false}, {"elastic-ext parent=4711  group=1", false},
      {"elastic-ext parent=-1 group=1", false},    {"elastic-ext parent=4711 group=-1", false},
      {"elastic-ext parent= group=1", false},      {"elastic-ext parent=4711 group=", false},
      {"elastic-ext parent=1234567890123456789 group=1", false},
      {"elastic-ext:4711:3", false},               {"user comment", false},
      {"", false},
  };
  for (const auto& c : comments) EXPECT_EQ(ExtensionLink::ParseAdminComment(c.text).has_value(), c.ok) << c.text;
  const Case names[] = {
      {"elastic-ext:4711:3", true},   {"elastic-ext:1:0", true},    {"elastic-ext:0:1", false},
      {"elastic-ext:4711", false},    {"elastic-ext:4711:", false}, {"elastic-ext::3", false},
      {"elastic-ext:4711:3:", false}, {"elastic-ext:4711:3x", false}, {"elastic-ext:+4711:3", false},
      {"elastic-ext 4711:3", false},  {"elastic-ext parent=4711 group=3", false}, {"", false},
  };
  for (const auto& c : names) EXPECT_EQ(ExtensionLink::ParseJobName(c.text).has_value(), c.ok) << c.text;
}

TEST(ExtensionLink, CheapChecks) {
  EXPECT_TRUE(IsExtensionComment("elastic-ext parent=1 group=2"));
  EXPECT_TRUE(IsExtensionComment("elastic-ext anything"));  // a prefix test: ParseAdminComment reads the ids
  EXPECT_FALSE(IsExtensionComment("elastic-ext:1:2"));
  EXPECT_FALSE(IsExtensionComment("note: elastic-ext parent=1 group=2"));
  EXPECT_FALSE(IsExtensionComment(""));
  EXPECT_TRUE(HasExtensionJobName("elastic-ext:100:1"));
  EXPECT_TRUE(HasExtensionJobName("elastic-ext:whatever"));
  EXPECT_FALSE(HasExtensionJobName("elastic-ext parent=1 group=2"));
  EXPECT_FALSE(HasExtensionJobName("train"));
}

TEST(JoinToken, NewTokensAreValidAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto token = NewJoinToken();
    ASSERT_TRUE(token.ok()) << token.status().ToString();
    EXPECT_TRUE(IsValidJoinToken(token.value())) << token.value();
    EXPECT_TRUE(seen.insert(token.value()).second) << token.value();
  }
}

TEST(JoinToken, OnlyThirtyTwoLowercaseHexDigits) {
  EXPECT_TRUE(IsValidJoinToken("0123456789abcdef0123456789abcdef"));
  for (const char* bad : {"", "0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdef0",
                          "0123456789ABCDEF0123456789abcdef", "0123456789abcdeg0123456789abcdef",
                          "0123456789abcdef 123456789abcdef"}) {
    EXPECT_FALSE(IsValidJoinToken(bad)) << bad;
  }
  EXPECT_FALSE(IsValidJoinToken(std::string_view("0123456789abcdef\0" "123456789abcdef", 32)));
}

TEST(EnvVars, EveryVariableHasASetterAndAReaderAndIsFoundByName) {
  std::set<std::string> names;
  for (const EnvVar& v : EnvVars()) {
    const std::string name = v.name;
    EXPECT_TRUE(name.starts_with("ELASTIC_")) << name;
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    EXPECT_NE(v.set_by, 0u) << name;
    EXPECT_NE(v.read_by, 0u) << name << ": a variable nobody reads is not exported";
    EXPECT_NE(std::string(v.meaning), "") << name;
    EXPECT_EQ(FindEnvVar(name), &v);
  }
  EXPECT_EQ(FindEnvVar("ELASTIC_LOG_LEVEL"), nullptr);  // the runtime's own tunable
  // Every variable of the spec is in the table.
  for (const auto& [name, value] : FullSpec().ToEnvironment()) EXPECT_NE(FindEnvVar(name), nullptr) << name;
}

TEST(EnvVars, ScrubAndPerLaunchListsAreTheDocumentedOnes) {
  std::set<std::string> scrubbed, per_launch;
  for (const EnvVar& v : EnvVars()) {
    if (v.plugin_scrubs) scrubbed.insert(v.name);
    if (v.per_launch) per_launch.insert(v.name);
  }
  // docs/interfaces.md section 2: what the plugin removes from an elastic job's environment.
  EXPECT_EQ(scrubbed, (std::set<std::string>{
                          "ELASTIC_SPEC_VERSION", "ELASTIC_MODE", "ELASTIC_JOB_ID", "ELASTIC_ROLE",
                          "ELASTIC_CONTROLLER", "ELASTIC_GPUS_MIN", "ELASTIC_GPUS_MAX", "ELASTIC_GPU_STEP",
                          "ELASTIC_BATCH_MIN", "ELASTIC_BATCH_MAX", "ELASTIC_LOCAL_BATCH_MIN",
                          "ELASTIC_LOCAL_BATCH_MAX", "ELASTIC_LR_SCALING", "ELASTIC_MODEL",
                          "ELASTIC_FUSE_MAX_PER_GPU", "ELASTIC_FUSE_TRIALS", "ELASTIC_FUSE_LEADER", "ELASTIC_GPU_TYPES",
                          "ELASTIC_JOIN_TOKEN", "ELASTIC_PARENT_JOB_ID", "ELASTIC_GROUP_ID", "ELASTIC_RENDEZVOUS_URI",
                          "ELASTIC_MUNGE_SOCKET", "ELASTIC_STANDALONE", "ELASTIC_JOIN", "ELASTIC_RELAUNCH_FROM"}));
  // What elastic-launch never hands from a parent to an extension's launcher.
  EXPECT_EQ(per_launch, (std::set<std::string>{
                            "ELASTIC_SPEC_VERSION", "ELASTIC_MODE", "ELASTIC_JOB_ID", "ELASTIC_ROLE",
                            "ELASTIC_CONTROLLER", "ELASTIC_JOIN_TOKEN", "ELASTIC_GROUP_ID", "ELASTIC_PARENT_JOB_ID",
                            "ELASTIC_RENDEZVOUS_URI", "ELASTIC_NODE_GROUP", "ELASTIC_LOCAL_RANK",
                            "ELASTIC_LOCAL_SIZE", "ELASTIC_JOIN", "ELASTIC_RUN_DIR", "ELASTIC_FUSE_TRIALS",
                            "ELASTIC_FUSE_LEADER", "ELASTIC_RELAUNCH_FROM", "ELASTIC_SPANNED_NODES"}));
}

TEST(EnvVars, AnExtensionGetsTheJobsEnvironmentButSlurmsMpisAndTheNodesOwn) {
  // The job's tunables reach the ranks that join: BLAS, OpenMP, NCCL, CUDA, torch, MPI's settings.
  for (const char* name : {"OPENBLAS_CORETYPE", "OMP_NUM_THREADS", "MKL_CBWR", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA",
                           "CUDA_DEVICE_MAX_CONNECTIONS", "TORCH_NCCL_BLOCKING_WAIT", "PYTHONPATH", "PATH",
                           "LD_LIBRARY_PATH", "OMPI_MCA_btl", "PMIX_MCA_gds", "PRTE_MCA_plm", "MASTER_ADDR", "ELASTIC_NODE_GROUPS",
                           "ELASTIC_LOG_LEVEL", "BASH_FUNC_module%%", "USER"}) {
    EXPECT_TRUE(CarriedToExtensionsByDefault(name)) << name;
    EXPECT_FALSE(NeverCarriedToExtensions(name)) << name;
  }
  // Set by Slurm, PMIx and the MPI launcher for each job, step and rank: never, even if asked.
  for (const char* name : {"SLURM_JOB_ID", "SLURM_NTASKS", "SLURMD_NODENAME", "SRUN_DEBUG", "SBATCH_EXPORT",
                           "SALLOC_PARTITION", "_SLURM_SPANK_OPTION_elastic_elastic_extension", "SPANK_X", "PMI_RANK",
                           "PMIX_RANK", "PMIX_SERVER_URI41", "PRTE_LAUNCHED", "OMPI_COMM_WORLD_RANK", "OMPI_FILE_LOCATION"}) {
    EXPECT_TRUE(NeverCarriedToExtensions(name)) << name;
    EXPECT_FALSE(CarriedToExtensionsByDefault(name)) << name;
  }
  // The contract's per-launch variables: the join token above all.
  for (const EnvVar& v : EnvVars()) EXPECT_EQ(NeverCarriedToExtensions(v.name), v.per_launch) << v.name;
  // One node's or one allocation's own: left out unless the user exports them by name.
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "TMPDIR", "HOME",
                           "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "SSH_AUTH_SOCK", "XDG_RUNTIME_DIR"}) {
    EXPECT_FALSE(CarriedToExtensionsByDefault(name)) << name;
    EXPECT_FALSE(NeverCarriedToExtensions(name)) << name;
  }
  EXPECT_FALSE(CarriedToExtensionsByDefault(""));
}

}  // namespace
}  // namespace elastic::contract
