// Unit tests of the pure parts of elastic_mpi: sharding, schedules, tunables, lr rules,
// gradient-noise statistics, the join record, the topology summary.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "elastic/common/env_vars.h"
#include "elastic_mpi/join.h"
#include "elastic_mpi/scaling.h"
#include "elastic_mpi/session.h"
#include "elastic_mpi/sharding.h"
#include "elastic_mpi/topology.h"
#include "elastic_mpi/tunables.h"

namespace em = elastic::mpi;

// --- sharding --------------------------------------------------------------------------------

TEST(Sharding, PermutationIsAPermutationAndDependsOnEpoch) {
  em::EpochSharder sharder(1000, 7);
  std::set<std::uint64_t> e0, e1;
  bool differ = false;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    e0.insert(sharder.SampleAt(0, i));
    e1.insert(sharder.SampleAt(1, i));
  }
  for (std::uint64_t i = 0; i < 1000 && !differ; ++i) differ = sharder.SampleAt(0, i) != sharder.SampleAt(1, i);
  EXPECT_EQ(e0.size(), 1000u);
  EXPECT_EQ(e1.size(), 1000u);
  EXPECT_TRUE(differ);
}

TEST(Sharding, SameSeedSameOrderOnEveryInstance) {
  em::EpochSharder a(500, 3), b(500, 3), c(500, 4);
  bool all_same = true;
  bool any_diff = false;
  for (std::uint64_t i = 0; i < 500; ++i) {
    all_same = all_same && a.SampleAt(2, i) == b.SampleAt(2, i);
    any_diff = any_diff || a.SampleAt(2, i) != c.SampleAt(2, i);
  }
  EXPECT_TRUE(all_same);
  EXPECT_TRUE(any_diff);
}

TEST(Sharding, SliceOfCoversEvenly) {
  for (std::uint64_t count : {0ull, 1ull, 7ull, 64ull, 65ull}) {
    for (int w : {1, 2, 3, 6}) {
      std::uint64_t next = 0;
      for (int r = 0; r < w; ++r) {
        std::uint64_t b = 0, e = 0;
        em::EpochSharder::SliceOf(count, r, w, &b, &e);
        EXPECT_EQ(b, next);
        EXPECT_LE(e - b, count / static_cast<std::uint64_t>(w) + 1);
        EXPECT_GE(e - b, count / static_cast<std::uint64_t>(w));
        next = e;
      }
      EXPECT_EQ(next, count);
    }
  }
}

// Oracle: simulate every rank of a world whose size changes at arbitrary steps (each rank keeps
// its own sharder copy; newcomers copy the cursor, as the session's hand-over does) and check
// that every (epoch, sample) is seen exactly once.
TEST(Sharding, ExactlyOnceAcrossRescales) {
  const std::uint64_t n = 1003;
  const std::uint64_t epochs = 3;
  std::mt19937 rng(11);
  std::vector<em::EpochSharder> ranks(2, em::EpochSharder(n, 99));
  std::map<std::pair<std::uint64_t, std::uint64_t>, int> seen;
  std::uint64_t batch = 64;
  while (ranks[0].cursor().epoch < epochs) {
    if (rng() % 5 == 0) {  // rescale: new size 1..6, new batch
      const int size = 1 + static_cast<int>(rng() % 6);
      const em::ShardCursor cursor = ranks[0].cursor();
      ranks.assign(static_cast<std::size_t>(size), em::EpochSharder(n, 99));
      for (auto& r : ranks) r.cursor() = cursor;
      batch = 16 + rng() % 100;
    }
    const int size = static_cast<int>(ranks.size());
    std::uint64_t step_total = 0;
    std::uint64_t epoch = 0;
    for (int r = 0; r < size; ++r) {
      const auto shard = ranks[static_cast<std::size_t>(r)].Next(batch, r, size);
      for (auto s : shard.samples) ++seen[{shard.epoch, s}];
      step_total += shard.samples.size();
      epoch = shard.epoch;
      EXPECT_LE(shard.global_count, batch);
    }
    (void)epoch;
    for (const auto& r : ranks) EXPECT_EQ(r.cursor().cursor, ranks[0].cursor().cursor);
    EXPECT_GT(step_total, 0u);
  }
  EXPECT_EQ(seen.size(), n * epochs);
  for (const auto& [key, count] : seen) ASSERT_EQ(count, 1) << "epoch " << key.first << " sample " << key.second;
}

TEST(Sharding, BadArguments) {
  EXPECT_THROW(em::EpochSharder(0, 1), elastic::Error);
  em::EpochSharder s(10, 1);
  EXPECT_THROW(s.Next(0, 0, 1), elastic::Error);
  EXPECT_THROW(s.Next(4, 2, 2), elastic::Error);
  EXPECT_THROW(s.SampleAt(0, 10), elastic::Error);
}

// --- schedules -------------------------------------------------------------------------------

TEST(Schedule, Parses) {
  struct Case {
    const char* text;
    std::vector<em::ScheduleEntry> want;
  };
  const std::vector<Case> cases = {
      {"", {}},
      {"2", {{2, 0}}},
      {"2->4->6->4->2", {{2, 0}, {4, 0}, {6, 0}, {4, 0}, {2, 0}}},
      {"2:64->4:128", {{2, 64}, {4, 128}}},
  };
  for (const auto& c : cases) {
    auto r = em::ParseSchedule(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(r.value(), c.want) << c.text;
  }
}

TEST(Schedule, RejectsBadEntries) {
  for (const char* text : {"0", "2->", "->2", "x", "2:0", "2:", "2->-1", "2;4", "2:64:1"}) {
    auto r = em::ParseSchedule(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().kind(), elastic::ErrorKind::kInvalidArgument);
    EXPECT_NE(r.status().message().find("bad schedule entry"), std::string::npos) << r.status().message();
  }
}

// --- tunables and options --------------------------------------------------------------------

TEST(Tunables, EveryRowHasAnElasticVariableAndNamesAreUnique) {
  std::set<std::string_view> names, envs;
  for (const auto& t : em::Tunables()) {
    // CUDA_VISIBLE_DEVICES: with the Slurm job id, how this process numbers its GPUs (device choice).
    EXPECT_TRUE(t.env.starts_with("ELASTIC_") || t.env.starts_with("SLURM_") || t.env == "CUDA_VISIBLE_DEVICES")
        << t.env;
    EXPECT_TRUE(names.insert(t.name).second) << t.name;
    EXPECT_TRUE(envs.insert(t.env).second) << t.env;
    EXPECT_FALSE(t.help.empty());
  }
}

TEST(Tunables, EveryContractVariableTheRuntimeReadsIsInTheTable) {
  // The job contract (common/include/elastic/common/env_vars.h) says who reads each variable.
  std::set<std::string_view> envs;
  for (const auto& t : em::Tunables()) envs.insert(t.env);
  for (const auto& v : elastic::contract::EnvVars()) {
    if ((v.read_by & (elastic::contract::party::kRuntime | elastic::contract::party::kLauncher)) != 0) {
      EXPECT_TRUE(envs.count(v.name)) << v.name;
    }
  }
}

TEST(Tunables, DefaultsAndOverrides) {
  auto config = em::Config::FromMap({{"ELASTIC_SPAWN_TIMEOUT_S", "5"}}).value();
  EXPECT_EQ(config.GetDouble("spawn_timeout_s").value(), 5.0);
  EXPECT_EQ(config.GetDouble("connect_timeout_s").value(), 60.0);
  EXPECT_TRUE(config.IsSet("spawn_timeout_s"));
  EXPECT_FALSE(config.IsSet("connect_timeout_s"));
  EXPECT_FALSE(em::Config::FromMap({{"ELASTIC_NO_SUCH", "1"}}).ok());
  EXPECT_THROW(config.Get("no_such"), elastic::Error);
}

TEST(Options, BadValuesAreRefusedWithTheVariableName) {
  struct Case {
    const char* env;
    const char* value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"ELASTIC_SPAWN_TIMEOUT_S", "soon", "ELASTIC_SPAWN_TIMEOUT_S='soon' is not a number"},
      {"ELASTIC_STANDALONE", "maybe", "ELASTIC_STANDALONE='maybe' is not a boolean"},
      {"ELASTIC_LR_SCALING", "cubic", "ELASTIC_LR_SCALING: unknown learning-rate rule 'cubic'"},
      {"ELASTIC_SCHEDULE", "2->0", "ELASTIC_SCHEDULE: bad schedule entry '0'"},
      {"ELASTIC_SCHEDULE_EVERY", "0", "ELASTIC_SCHEDULE_EVERY must be >= 1"},
      {"ELASTIC_MODE", "flexible", "ELASTIC_MODE='flexible' is not elastic or rigid"},
      {"ELASTIC_BACKEND", "gloo", "ELASTIC_BACKEND: unknown backend 'gloo'"},
      {"ELASTIC_LOG_LEVEL", "loud", "ELASTIC_LOG_LEVEL='loud' is not a log level"},
      {"ELASTIC_TOTAL_SAMPLES", "-5", "ELASTIC_TOTAL_SAMPLES must be a number of samples >= 0"},
      {"ELASTIC_TOTAL_SAMPLES", "lots", "ELASTIC_TOTAL_SAMPLES='lots' is not a number"},
  };
  for (const auto& c : cases) {
    auto config = em::Config::FromMap({{c.env, c.value}}).value();
    auto o = em::SessionOptions::FromConfig(config);
    ASSERT_FALSE(o.ok()) << c.env;
    EXPECT_EQ(o.status().kind(), elastic::ErrorKind::kConfig) << c.env;
    EXPECT_NE(o.status().message().find(c.message), std::string::npos) << o.status().message();
  }
  auto good = em::SessionOptions::FromConfig(em::Config::FromMap({{"ELASTIC_SCHEDULE", "2->4:128"},
                                                                   {"ELASTIC_LR_SCALING", "sqrt"},
                                                                   {"ELASTIC_TOTAL_SAMPLES", "115305030"}})
                                                 .value());
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good.value().total_samples, 115305030.0);
  EXPECT_EQ(good.value().lr_rule, em::LrRule::kSqrt);
  EXPECT_EQ(good.value().schedule.size(), 2u);
}

// --- learning-rate rules and gradient noise --------------------------------------------------

TEST(LrRules, ClosedForms) {
  em::GradientNoise none;
  EXPECT_DOUBLE_EQ(em::LrFactor(em::LrRule::kNone, 256, 64, none), 1.0);
  EXPECT_DOUBLE_EQ(em::LrFactor(em::LrRule::kLinear, 256, 64, none), 4.0);
  EXPECT_DOUBLE_EQ(em::LrFactor(em::LrRule::kSqrt, 256, 64, none), 2.0);
  EXPECT_DOUBLE_EQ(em::LrFactor(em::LrRule::kAdaScale, 256, 64, none), 1.0);  // no statistics yet
  EXPECT_FALSE(em::ParseLrRule("cubic").ok());
  EXPECT_THROW(em::LrFactor(em::LrRule::kLinear, 0, 64, none), elastic::Error);
}

TEST(LrRules, AdaScaleGainBetweenOneAndScale) {
  em::GradientNoise noise(0.0);
  // grad_var = 64, grad_sqr = 1 (set through one exact observation below).
  // With B = 128, n = 2: weighted_local = B*(sqr) + n*var = 128 + 128, global = sqr + var/B = 1.5.
  ASSERT_TRUE(noise.Observe(128.0 * 1.0 + 2 * 64.0, 1.0 + 64.0 / 128.0, 128.0, 2));
  EXPECT_NEAR(noise.grad_var(), 64.0, 1e-12);
  EXPECT_NEAR(noise.grad_sqr(), 1.0, 1e-12);
  // B0 = 64: var0 = 1, S = 4: r = (1 + 1) / (1/4 + 1) = 1.6.
  EXPECT_NEAR(em::LrFactor(em::LrRule::kAdaScale, 256, 64, noise), 1.6, 1e-12);
  EXPECT_NEAR(em::LrFactor(em::LrRule::kAdaScale, 64, 64, noise), 1.0, 1e-12);
}

// Statistical oracle: simulated per-rank gradients with known |g|^2 and tr(Sigma).
TEST(GradientNoise, EstimatesKnownMoments) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  const int dim = 20;
  const double sigma = 2.0;  // per-coordinate per-sample std: tr(Sigma) = dim * 4 = 80
  std::vector<double> g(dim, 0.5);  // |g|^2 = 5
  em::GradientNoise noise(0.99);
  const std::vector<int> batches = {8, 16, 24};  // unequal local batches
  for (int step = 0; step < 4000; ++step) {
    std::vector<double> global(dim, 0.0);
    double weighted = 0;
    double total = 0;
    for (int b : batches) {
      std::vector<double> local(dim);
      for (int j = 0; j < dim; ++j) local[j] = g[j] + sigma / std::sqrt(b) * normal(rng);
      double sq = 0;
      for (int j = 0; j < dim; ++j) {
        sq += local[j] * local[j];
        global[j] += b * local[j];
      }
      weighted += b * sq;
      total += b;
    }
    double gsq = 0;
    for (int j = 0; j < dim; ++j) gsq += (global[j] / total) * (global[j] / total);
    noise.Observe(weighted, gsq, total, static_cast<int>(batches.size()));
  }
  EXPECT_NEAR(noise.grad_var(), 80.0, 8.0);
  EXPECT_NEAR(noise.grad_sqr(), 5.0, 0.5);
  EXPECT_NEAR(*noise.noise_scale(), 16.0, 2.5);
  EXPECT_FALSE(noise.Observe(1, 1, 10, 1));  // one rank: no information
}

// --- join record -----------------------------------------------------------------------------

TEST(Join, RecordLayoutAndComparison) {
  const std::string token = "0123456789abcdef0123456789abcdef";
  auto r = em::EncodeJoinRecord(0x01020304u, token);
  ASSERT_TRUE(r.ok());
  const auto& rec = r.value();
  EXPECT_EQ(std::string(rec.begin(), rec.begin() + 8), "ELJOIN01");
  EXPECT_EQ(rec[8], 1);
  EXPECT_EQ(rec[11], 4);
  EXPECT_EQ(std::string(rec.begin() + 16, rec.begin() + 48), token);
  for (int i = 48; i < 64; ++i) EXPECT_EQ(rec[static_cast<std::size_t>(i)], 0);
  EXPECT_TRUE(em::RecordsEqual(rec, em::EncodeJoinRecord(0x01020304u, token).value()));
  EXPECT_FALSE(em::RecordsEqual(rec, em::EncodeJoinRecord(0x01020305u, token).value()));
  EXPECT_FALSE(em::RecordsEqual(rec, em::EncodeJoinRecord(0x01020304u, "0123456789abcdef0123456789abcdee").value()));
  EXPECT_EQ(em::JoinServiceName("4711", 3), "elastic.4711.3");
}

TEST(Join, InvalidTokens) {
  for (const char* t : {"", "0123", "0123456789ABCDEF0123456789ABCDEF", "0123456789abcdef0123456789abcdeg",
                        "0123456789abcdef0123456789abcdef0"}) {
    EXPECT_FALSE(em::IsValidToken(t)) << t;
    auto r = em::EncodeJoinRecord(1, t);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().kind(), elastic::ErrorKind::kInvalidArgument);
  }
}

// --- topology --------------------------------------------------------------------------------

TEST(Topology, SummaryHasCoresAndIsJson) {
  auto t = em::DescribeTopology();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_GE(t.value().cores, 1);
  EXPECT_GE(t.value().pus, t.value().cores);
  EXPECT_GE(t.value().numa_nodes, 1);
  const std::string json = t.value().ToJson();
  EXPECT_NE(json.find("\"cores\":"), std::string::npos) << json;
  EXPECT_NE(json.find("\"gpus\":"), std::string::npos) << json;
}

TEST(Topology, BindRejectsBadRanks) {
  EXPECT_FALSE(em::BindToShare(2, 2).ok());
  EXPECT_FALSE(em::BindToShare(0, 0).ok());
}
