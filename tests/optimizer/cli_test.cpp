// elastic-optimize end to end: exit codes, JSON output and error messages on small fixtures.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace {

struct CliRun {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs elastic-optimize with `args` (a shell-quoted string) and captures its output.
CliRun Optimize(const std::string& args) {
  // One stderr file per call and process: ctest runs test cases in parallel processes.
  static int calls = 0;
  const std::string err_file = ::testing::TempDir() + "elastic-optimize-stderr-" + std::to_string(getpid()) + "-" +
                               std::to_string(++calls) + ".txt";
  const std::string cmd = std::string(ELASTIC_OPTIMIZE_BIN) + " " + args + " 2>" + err_file;
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* e = fopen(err_file.c_str(), "r")) {
    while ((n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
    fclose(e);
  }
  std::remove(err_file.c_str());
  return r;
}

std::string Fixture(const std::string& name) { return std::string(ELASTIC_OPTIMIZER_FIXTURES) + "/" + name; }

TEST(Cli, SolvesAnOptionTableSnapshot) {
  const CliRun r = Optimize("--policy dp --input " + Fixture("small.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(r.out);
  // 8 GPUs: a on 2 (1.0) + b on 4... a(2)+c(4, worth 2)+... best: b on 4 (3.2) + c on 4 (2.0) = 5.2
  // versus a on 4 (1.8) + b on 4 (3.2) = 5.0, a on 2 + b on 1 + c on 4 (no: 7 GPUs, 1+1+2 = 4).
  EXPECT_NEAR(plan["objective"].get<double>(), 5.2, 1e-12);
  EXPECT_NEAR(plan["bound"].get<double>(), 5.2, 1e-12);
  EXPECT_TRUE(plan["exact"].get<bool>());
  EXPECT_TRUE(plan.contains("solve_ms"));
  ASSERT_EQ(plan["assignments"].size(), 3U);
  EXPECT_TRUE(plan["assignments"][0]["pending"].get<bool>());
  EXPECT_EQ(plan["assignments"][1]["gpus"], 4);
  EXPECT_EQ(plan["assignments"][1]["batch"], 256);
  EXPECT_EQ(plan["assignments"][2]["placement"].size(), 1U);
}

TEST(Cli, EveryPolicyAndBothObjectivesRun) {
  for (const char* policy : {"dp", "greedy", "optimus", "static", "evolutionary", "pollux"}) {
    const CliRun r = Optimize(std::string("--policy ") + policy + " --objective power-mean --p -0.5 --input " +
                           Fixture("small.json"));
    EXPECT_EQ(r.code, 0) << policy << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["policy"], policy);
  }
}

TEST(Cli, RemainingTimeObjective) {
  // train-a (running on 2 GPUs, 1 h old) has 2 h left at its base size, the others none known.
  // An exponent of -1 makes a weigh 2: a on 4 GPUs (3.6) + b on 4 (3.2) = 6.8 beats b + c (5.2).
  CliRun r = Optimize("--srpt-exponent -1 --input " + Fixture("small.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json plan = nlohmann::json::parse(r.out);
  EXPECT_NEAR(plan["objective"].get<double>(), 6.8, 1e-12);
  EXPECT_EQ(plan["assignments"][0]["gpus"], 4);
  // Kept running with a 30 s rescale cost, a grows to 4 GPUs (the age-based penalty, 0.98, lets
  // it: 1.77 + 3.2 beats 1.0 + 3.2). A payback of 1000 makes the move cost 30,000 s against the
  // 4,000 s it would leave: a stays on 2 GPUs.
  r = Optimize("--keep-running --rescale-cost 30 --input " + Fixture("small.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["assignments"][0]["gpus"], 4);
  r = Optimize("--keep-running --rescale-cost 30 --rescale-payback 1000 --input " + Fixture("small.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["assignments"][0]["gpus"], 2);
  EXPECT_NEAR(plan["objective"].get<double>(), 4.2, 1e-12);
}

TEST(Cli, GoodputModelsInTheSnapshot) {
  const CliRun r = Optimize("--input " + Fixture("model.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(r.out);
  EXPECT_FALSE(plan["assignments"][0]["pending"].get<bool>());
  EXPECT_FALSE(plan["assignments"][1]["pending"].get<bool>());
  EXPECT_EQ(plan["assignments"][1]["gpu_type"], "v100");
}

TEST(Cli, ErrorsAndExitCodes) {
  struct Case {
    std::string args;
    int code;
    std::string err;
  };
  const std::vector<Case> cases = {
      {"", 2, "elastic-optimize: --input is required (see --help)\n"},
      {"--bogus", 2, "elastic-optimize: unrecognised option '--bogus' (see --help)\n"},
      {"--policy magic --input x", 2,
       "elastic-optimize: unknown policy 'magic' (known: dp, greedy, optimus, static, evolutionary, pollux)\n"},
      {"--objective fair --input x", 2,
       "elastic-optimize: unknown objective 'fair' (expected weighted-sum or power-mean)\n"},
      {"--p 0.5 --input x", 2,
       "elastic-optimize: need --p < 0, --pending-penalty > 0, --rescale-cost >= 0, --rescale-payback in [0, 1000], "
       "|--srpt-exponent| <= 2, --time-budget-ms > 0\n"},
      {"--srpt-exponent 3 --input x", 2,
       "elastic-optimize: need --p < 0, --pending-penalty > 0, --rescale-cost >= 0, --rescale-payback in [0, 1000], "
       "|--srpt-exponent| <= 2, --time-budget-ms > 0\n"},
      {"--rescale-payback inf --input x", 2,
       "elastic-optimize: need --p < 0, --pending-penalty > 0, --rescale-cost >= 0, --rescale-payback in [0, 1000], "
       "|--srpt-exponent| <= 2, --time-budget-ms > 0\n"},
      {"--input /nonexistent.json", 3, "elastic-optimize: cannot open '/nonexistent.json'\n"},
      {"--input " + Fixture("bad_gpus.json"), 3, "elastic-optimize: jobs[0].options[0].gpus: expected an integer\n"},
      {"--input " + Fixture("unknown_key.json"), 3, "elastic-optimize: jobs[0]: unknown key 'gpu'\n"},
      {"--input " + Fixture("unknown_type.json"), 3,
       "elastic-optimize: job 'j' option 0: GPU type 'h100' is not in the cluster\n"},
      {"bench --repeats 0", 2, "elastic-optimize bench: --repeats must be >= 1\n"},
      {"bench --sizes 12", 2, "elastic-optimize bench: bad size '12' (expected JOBSxGPUS or JOBSxGPUSxTYPES)\n"},
  };
  for (const Case& c : cases) {
    const CliRun r = Optimize(c.args);
    EXPECT_EQ(r.code, c.code) << c.args;
    EXPECT_EQ(r.err, c.err) << c.args;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
  const CliRun nj = Optimize("--input " + Fixture("not_json.json"));
  EXPECT_EQ(nj.code, 3);
  EXPECT_NE(nj.err.find("is not valid JSON"), std::string::npos) << nj.err;
}

TEST(Cli, HelpAndBench) {
  const CliRun help = Optimize("--help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--policy"), std::string::npos);
  const CliRun bench = Optimize("bench --sizes 40x32,40x48x2 --policies dp,greedy --repeats 1");
  ASSERT_EQ(bench.code, 0) << bench.err;
  size_t lines = 0;
  for (size_t pos = 0; (pos = bench.out.find('\n', pos)) != std::string::npos; ++pos) ++lines;
  EXPECT_EQ(lines, 4U);
  const nlohmann::json first = nlohmann::json::parse(bench.out.substr(0, bench.out.find('\n')));
  EXPECT_EQ(first["policy"], "dp");
  EXPECT_EQ(first["gap_to_best"], 0.0);
  EXPECT_TRUE(first.contains("median_ms"));
}

}  // namespace
