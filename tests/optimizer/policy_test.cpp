// Policies: property tests (every plan respects capacity, bounds, steps and batch bounds),
// dp optimality against brute force under each objective, and the objectives' semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string_view>

#include "elastic/optimizer/instances.h"
#include "elastic/optimizer/placement.h"
#include "elastic/optimizer/policy.h"
#include "elastic/optimizer/snapshot_json.h"

namespace elastic::optimizer {
namespace {

Plan MustSolve(std::string_view name, const Snapshot& s, const PolicyOptions& o = {}) {
  Result<std::unique_ptr<Policy>> p = MakePolicy(name);
  EXPECT_TRUE(p.ok());
  Result<Plan> plan = p.value()->Solve(s, o);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.value();
}

// Exhaustive optimum of a snapshot under an objective (small snapshots only).
double BruteForce(const Snapshot& s, const Objective& obj) {
  std::vector<int64_t> used(s.cluster.types.size(), 0);
  double best = 0.0;
  std::function<void(size_t, double)> rec = [&](size_t j, double v) {
    if (j == s.jobs.size()) {
      best = std::max(best, v);
      return;
    }
    rec(j + 1, v);
    for (const Option& o : s.jobs[j].options) {
      const auto t = static_cast<size_t>(s.cluster.TypeIndex(o.gpu_type));
      if (used[t] + o.gpus > s.cluster.types[t].capacity()) continue;
      used[t] += o.gpus;
      rec(j + 1, v + std::max(0.0, OptionValue(obj, s.jobs[j], o)));
      used[t] -= o.gpus;
    }
  };
  rec(0, 0.0);
  return best;
}

TEST(Policy, NamesAndUnknownName) {
  for (const std::string& n : PolicyNames()) {
    Result<std::unique_ptr<Policy>> p = MakePolicy(n);
    ASSERT_TRUE(p.ok()) << n;
    EXPECT_EQ(p.value()->name(), n);
  }
  Result<std::unique_ptr<Policy>> bad = MakePolicy("magic");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "unknown policy 'magic' (known: dp, greedy, optimus, static, evolutionary, pollux)");
}

// The table is the one list: every row makes the policy it names, names are unique, every row
// says what the policy does, and the name lists follow the table's order.
TEST(Policy, TableRowsAreConsistent) {
  std::set<std::string_view> seen;
  std::string joined;
  for (const PolicyEntry& e : PolicyTable()) {
    EXPECT_TRUE(seen.insert(e.name).second) << e.name;
    EXPECT_FALSE(e.help.empty()) << e.name;
    EXPECT_EQ(e.make()->name(), e.name);
    joined += (joined.empty() ? "" : ", ") + std::string(e.name);
  }
  EXPECT_EQ(PolicyNames().size(), PolicyTable().size());
  EXPECT_EQ(PolicyNameList(), joined);
}

TEST(Policy, EveryPlanRespectsCapacityBoundsStepsAndBatches) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    for (int types = 1; types <= 3; ++types) {
      InstanceSpec spec;
      spec.jobs = 60;
      spec.gpus = 96;
      spec.types = types;
      spec.seed = seed;
      const Snapshot s = RandomInstance(spec);
      PolicyOptions o;
      o.time_budget_ms = 50;
      for (const std::string& n : PolicyNames()) {
        const Plan plan = MustSolve(n, s, o);
        EXPECT_EQ(CheckPlan(s, plan).ToString(), "ok") << n << " seed " << seed << " types " << types;
        // Placement respects GPUs per node.
        std::map<std::pair<std::string, int>, int> per_node;
        for (const Assignment& a : plan.assignments) {
          for (const NodeSlice& ns : a.placement) per_node[{a.gpu_type, ns.node}] += ns.gpus;
        }
        for (const auto& [node, g] : per_node) {
          EXPECT_LE(g, s.cluster.types[static_cast<size_t>(s.cluster.TypeIndex(node.first))].gpus_per_node) << n;
        }
      }
    }
  }
}

TEST(Policy, DpIsOptimalUnderEachObjectiveAgainstBruteForce) {
  std::vector<Objective> objectives(3);
  objectives[1].kind = ObjectiveKind::kPowerMean;
  objectives[1].p = -0.5;
  objectives[1].pending_penalty = 1.1;
  objectives[2].rescale_cost_s = 3000.0;
  for (uint64_t seed = 1; seed <= 25; ++seed) {
    InstanceSpec spec;
    spec.jobs = 6;
    spec.gpus = 8 + static_cast<int>(seed % 8);
    spec.max_gpus = 8;
    spec.gpus_per_node = 4;
    spec.seed = seed;
    const Snapshot s = RandomInstance(spec);
    for (const Objective& obj : objectives) {
      PolicyOptions o;
      o.objective = obj;
      const Plan plan = MustSolve("dp", s, o);
      EXPECT_NEAR(plan.objective, BruteForce(s, obj), 1e-9) << "seed " << seed << " " << ObjectiveKindName(obj.kind);
      EXPECT_TRUE(plan.exact);
      EXPECT_EQ(plan.gap, 0.0);
    }
  }
}

TEST(Policy, DpBeatsOrMatchesEveryHeuristic) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    InstanceSpec spec;
    spec.jobs = 120;
    spec.gpus = 128;
    spec.seed = seed;
    const Snapshot s = RandomInstance(spec);
    PolicyOptions o;
    o.time_budget_ms = 100;
    const double dp = MustSolve("dp", s, o).objective;
    for (const std::string& n : PolicyNames()) {
      EXPECT_LE(MustSolve(n, s, o).objective, dp + 1e-9) << n;
    }
  }
}

// Jobs "a" and "b" on one node of `gpus` GPUs, each from 1 GPU to its largest option.
Snapshot TwoJobsOn(int gpus, const std::vector<Option>& a_options, const std::vector<Option>& b_options) {
  Snapshot s;
  s.cluster.types = {{"a100", 1, gpus}};
  for (const auto& [id, options] : {std::pair{"a", a_options}, std::pair{"b", b_options}}) {
    Job j;
    j.id = id;
    j.min_gpus = 1;
    for (const Option& o : options) j.max_gpus = std::max(j.max_gpus, o.gpus);
    j.options = options;
    s.jobs.push_back(j);
  }
  return s;
}

Snapshot TwoJobs() {
  const std::vector<Option> options = {{"a100", 1, 0, 1.0}, {"a100", 4, 0, 3.0}, {"a100", 8, 0, 4.0}};
  return TwoJobsOn(8, options, options);
}

TEST(Objectives, WeightedSumPrefersTheLargerTotal) {
  // 4 + 4 GPUs: 3 + 3 = 6 beats 8 + pending (4) and 1 + 7 (not an option).
  const Plan plan = MustSolve("dp", TwoJobs());
  EXPECT_NEAR(plan.objective, 6.0, 1e-12);
  EXPECT_EQ(plan.assignments[0].gpus, 4);
  EXPECT_EQ(plan.assignments[1].gpus, 4);
}

TEST(Objectives, PolluxCountsAPendingJobAsPolluxDoes) {
  // One node of 2 GPUs, two jobs that run on 1 GPU (utility 1) or 2 (1.9). Under Sia's pending
  // penalty (1.1) the power mean prefers one job on both GPUs (1.1 - 1/1.9 = 0.57 against
  // 2 x 0.1); Pollux's floor makes a pending job cost 1000 / 2 GPUs per node = 500, so the
  // pollux policy runs both. Its plan is still reported under the caller's objective (sum: 2).
  const std::vector<Option> options = {{"a100", 1, 0, 1.0}, {"a100", 2, 0, 1.9}};
  Snapshot s = TwoJobsOn(2, options, options);
  PolicyOptions o;
  const Plan pollux = MustSolve("pollux", s, o);
  EXPECT_EQ(pollux.assignments[0].gpus, 1);
  EXPECT_EQ(pollux.assignments[1].gpus, 1);
  EXPECT_NEAR(pollux.objective, 2.0, 1e-12);
  o.objective.kind = ObjectiveKind::kPowerMean;  // the caller's own power mean: Sia's penalty
  const Plan sia = MustSolve("dp", s, o);
  EXPECT_EQ(sia.assignments[0].gpus + sia.assignments[1].gpus, 2);
  EXPECT_TRUE(sia.assignments[0].pending || sia.assignments[1].pending);
}

TEST(Objectives, PowerMeanPendingPenaltyAdmitsMoreJobs) {
  Snapshot s = TwoJobs();
  s.jobs[1].options = {{"a100", 8, 0, 1.0}};  // b only runs on the whole node
  s.jobs[1].min_gpus = 8;
  PolicyOptions o;
  // Weighted sum: a on 8 GPUs (4) beats b on 8 (1).
  Plan plan = MustSolve("dp", s, o);
  EXPECT_EQ(plan.assignments[0].gpus, 8);
  EXPECT_TRUE(plan.assignments[1].pending);
  // Power mean p=-1: a at utility 4 is worth 1.1 - 1/4 = 0.85, b at utility 1 only
  // 1.1 - 1 = 0.1, and the two cannot both run.
  o.objective.kind = ObjectiveKind::kPowerMean;
  o.objective.p = -1.0;
  o.objective.pending_penalty = 1.1;
  plan = MustSolve("dp", s, o);
  EXPECT_NEAR(plan.objective, 1.1 - 0.25, 1e-12);
  EXPECT_EQ(plan.assignments[0].gpus, 8);
}

TEST(Objectives, RescalePenaltyKeepsARunningJobInPlace) {
  Snapshot s = TwoJobs();
  s.jobs.pop_back();
  s.jobs[0].state = JobState::kRunning;
  s.jobs[0].current = Configuration{"a100", 4, 0};
  s.jobs[0].age_s = 100.0;
  s.jobs[0].rescales = 2;
  PolicyOptions o;
  EXPECT_EQ(MustSolve("dp", s, o).assignments[0].gpus, 8);  // no penalty: grow to 8
  o.objective.rescale_cost_s = 30.0;                          // (100 - 60) / 130 = 0.31 x 4 < 3
  EXPECT_EQ(MustSolve("dp", s, o).assignments[0].gpus, 4);
}

TEST(Objectives, SrptExponentWeighsJobsByTheirRemainingTime) {
  // 8 GPUs; a has 1 h left at its base size, b 4 h. Uniform: 4 + 4 GPUs (3 + 3 beats 4 + 0).
  // Smith's rule (exponent 1): b weighs 1/4, so a alone on 8 (4) beats 3 + 0.75. Exponent 0.5:
  // b weighs 1/2, and 4 + 4 (3 + 1.5) beats 4 again.
  Snapshot s = TwoJobs();
  s.jobs[0].remaining_s = 3600.0;
  s.jobs[1].remaining_s = 4 * 3600.0;
  PolicyOptions o;
  EXPECT_EQ(MustSolve("dp", s, o).assignments[1].gpus, 4);
  o.objective.srpt_exponent = 1.0;
  Plan plan = MustSolve("dp", s, o);
  EXPECT_EQ(plan.assignments[0].gpus, 8);
  EXPECT_TRUE(plan.assignments[1].pending);
  EXPECT_NEAR(plan.objective, 4.0, 1e-12);
  o.objective.srpt_exponent = 0.5;
  plan = MustSolve("dp", s, o);
  EXPECT_EQ(plan.assignments[1].gpus, 4);
  EXPECT_NEAR(plan.objective, 4.5, 1e-12);
  EXPECT_NEAR(OptionValue(o.objective, s.jobs[1], s.jobs[1].options[2]), 2.0, 1e-12);
  // Under a minute counts as a minute; an unknown remaining time leaves the weight alone.
  s.jobs[1].remaining_s = 1.0;
  EXPECT_NEAR(OptionValue(o.objective, s.jobs[1], s.jobs[1].options[0]), std::sqrt(60.0), 1e-12);
  s.jobs[1].remaining_s = 0.0;
  EXPECT_NEAR(OptionValue(o.objective, s.jobs[1], s.jobs[1].options[0]), 1.0, 1e-12);
}

TEST(Objectives, RemainingTimePenaltyWeighsTheSavingAgainstTheCost) {
  // A job on 4 GPUs (utility 3) could go to 8 (utility 4), with R seconds left at its base size:
  // R / 3 left now, R / 4 after growing. With a 30 s rescale cost and a payback of 3 it grows
  // only when R / 3 - R / 4 = R / 12 > 90 s, that is R > 1080 s.
  Snapshot s = TwoJobs();
  s.jobs.pop_back();
  s.jobs[0].state = JobState::kRunning;
  s.jobs[0].current = Configuration{"a100", 4, 0};
  s.jobs[0].age_s = 1e6;  // the age-based penalty would allow the change
  PolicyOptions o;
  o.objective.rescale_cost_s = 30.0;
  o.objective.rescale_payback = 3.0;
  s.jobs[0].remaining_s = 1000.0;
  EXPECT_EQ(MustSolve("dp", s, o).assignments[0].gpus, 4);
  s.jobs[0].remaining_s = 1200.0;
  EXPECT_EQ(MustSolve("dp", s, o).assignments[0].gpus, 8);
  s.jobs[0].remaining_s = 0.0;  // unknown: Pollux's age-based form
  EXPECT_EQ(MustSolve("dp", s, o).assignments[0].gpus, 8);
  s.jobs[0].age_s = 100.0;  // (100 - 2 x 30) / 130 x 4 < 3
  s.jobs[0].rescales = 2;
  EXPECT_EQ(MustSolve("dp", s, o).assignments[0].gpus, 4);
  // With the remaining time known, that history holds the job as well: 10^6 s left would pay
  // for the growth many times over (factor 0.9996), but it was rescaled twice in 100 s.
  s.jobs[0].remaining_s = 1e6;
  EXPECT_EQ(MustSolve("dp", s, o).assignments[0].gpus, 4);
  const Option grown = s.jobs[0].options[2];
  ASSERT_EQ(grown.gpus, 8);
  EXPECT_NEAR(RescaleFactor(o.objective, s.jobs[0], grown.utility, 30.0),
              1e6 / (1e6 + 3.0 * 30.0 * 4.0) * (40.0 / 130.0), 1e-12);
  s.jobs[0].age_s = 1e6;
  EXPECT_EQ(MustSolve("dp", s, o).assignments[0].gpus, 8);
  EXPECT_DOUBLE_EQ(RescaleFactor(o.objective, s.jobs[0], grown.utility, 0.0), 1.0);
}

TEST(Policy, OptimusGivesTheNextGpuToTheLargestRemainingTimeReduction) {
  // 3 GPUs, two jobs at 1 GPU each (first come first served), options 1 (utility 1), 2 (1.5).
  // The third GPU saves the job with R seconds left R * (1 - 1 / 1.5) = R / 3: it goes to the
  // job with more time left, whichever that is.
  const std::vector<Option> options = {{"a100", 1, 0, 1.0}, {"a100", 2, 0, 1.5}};
  Snapshot s = TwoJobsOn(3, options, options);
  s.jobs[0].remaining_s = 600.0;
  s.jobs[1].remaining_s = 6000.0;
  Plan plan = MustSolve("optimus", s);
  EXPECT_EQ(plan.assignments[0].gpus, 1);
  EXPECT_EQ(plan.assignments[1].gpus, 2);
  std::swap(s.jobs[0].remaining_s, s.jobs[1].remaining_s);
  plan = MustSolve("optimus", s);
  EXPECT_EQ(plan.assignments[0].gpus, 2);
  EXPECT_EQ(plan.assignments[1].gpus, 1);
}

TEST(Policy, OptimusRanksByRemainingTimeNotBySpeedup) {
  // 4 GPUs, both jobs 1 h left, a: 1 GPU 1.0, 2 GPUs 2.0, 3 GPUs 3.5; b: 1 GPU 1.0, 2 GPUs 1.4.
  // After 1 + 1, a's step to 2 saves 1 - 1/2 = 0.5 h (b's 0.29): a gets 2. Then a's step to 3
  // saves 1/2 - 1/3.5 = 0.21 h, b's 1 - 1/1.4 = 0.29 h: b gets the last GPU, although a's step
  // gains more speedup (1.5 against 0.4).
  Snapshot s = TwoJobsOn(4, {{"a100", 1, 0, 1.0}, {"a100", 2, 0, 2.0}, {"a100", 3, 0, 3.5}},
                         {{"a100", 1, 0, 1.0}, {"a100", 2, 0, 1.4}});
  s.jobs[0].remaining_s = s.jobs[1].remaining_s = 3600.0;
  Plan plan = MustSolve("optimus", s);
  EXPECT_EQ(plan.assignments[0].gpus, 2);
  EXPECT_EQ(plan.assignments[1].gpus, 2);
  // Weights are the remaining time itself (exponent -1), not its square root: with a (options
  // 1.0 / 1.5) 2 h left and b (1.0 / 2.0) 1 h left, the third GPU of a 3-GPU node saves a
  // 2 x 1/3 = 0.67 h and b 0.5 h: a gets it (square-root weights would give it to b).
  s.cluster.types = {{"a100", 1, 3}};
  s.jobs[0].max_gpus = 2;
  s.jobs[0].remaining_s = 7200.0;
  s.jobs[0].options = {{"a100", 1, 0, 1.0}, {"a100", 2, 0, 1.5}};
  s.jobs[1].options = {{"a100", 1, 0, 1.0}, {"a100", 2, 0, 2.0}};
  plan = MustSolve("optimus", s);
  EXPECT_EQ(plan.assignments[0].gpus, 2);
  EXPECT_EQ(plan.assignments[1].gpus, 1);
}

TEST(Policy, OptimusKeepsARunningJobThePenaltyHoldsInPlace) {
  // A running job on 4 GPUs, young and rescaled twice: the rescale penalty makes every other size
  // worth nothing. With keep_running, optimus leaves it on its 4 GPUs (as without it).
  Snapshot s = TwoJobs();
  s.jobs.pop_back();
  s.jobs[0].state = JobState::kRunning;
  s.jobs[0].current = Configuration{"a100", 4, 0};
  s.jobs[0].age_s = 50.0;
  s.jobs[0].rescales = 2;
  PolicyOptions o;
  o.objective.rescale_cost_s = 30.0;
  EXPECT_EQ(MustSolve("optimus", s, o).assignments[0].gpus, 4);
  o.keep_running = true;
  EXPECT_EQ(MustSolve("optimus", s, o).assignments[0].gpus, 4);
}

TEST(Objectives, ExtremeRemainingTimesStayExact) {
  // A minute against 10^6 s left, exponent 2: weights 3600 and 1.3e-5 are still summable, so
  // the long job gets the GPUs the short one cannot use (the DP must not lose it to rounding).
  Snapshot s = TwoJobs();
  s.jobs[0].max_gpus = 4;
  s.jobs[0].options.pop_back();
  s.jobs[0].remaining_s = 60.0;
  s.jobs[1].remaining_s = 1e6;
  PolicyOptions o;
  o.objective.srpt_exponent = 2.0;
  const Plan plan = MustSolve("dp", s, o);
  EXPECT_EQ(plan.assignments[0].gpus, 4);
  EXPECT_EQ(plan.assignments[1].gpus, 4);
  EXPECT_TRUE(plan.exact);
  // Huge remaining times are clamped (10^7 s) in the weights and refused beyond 10^9 s.
  s.jobs[1].remaining_s = 1e9;
  EXPECT_NEAR(OptionValue(o.objective, s.jobs[1], s.jobs[1].options[0]), std::pow(3600.0 / 1e7, 2.0), 1e-18);
  s.jobs[1].remaining_s = 2e9;
  EXPECT_EQ(Validate(s).message(), "job 'b': remaining_s must be within [0, 1e9]");
}

TEST(SnapshotJson, RemainingTimeRoundTrips) {
  const nlohmann::json in = nlohmann::json::parse(R"({"cluster": {"gpu_types": [{"name": "a100", "nodes": 1, "gpus_per_node": 4}]},
    "jobs": [{"id": "a", "remaining_s": 5400.5, "options": [{"gpu_type": "a100", "gpus": 1, "utility": 1.0}]},
             {"id": "b", "options": [{"gpu_type": "a100", "gpus": 1, "utility": 1.0}]}]})");
  Result<Snapshot> s = SnapshotFromJson(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s.value().jobs[0].remaining_s, 5400.5);
  EXPECT_EQ(s.value().jobs[1].remaining_s, 0.0);
  const nlohmann::json out = SnapshotToJson(s.value());
  EXPECT_EQ(out["jobs"][0]["remaining_s"], 5400.5);
  EXPECT_FALSE(out["jobs"][1].contains("remaining_s"));  // unknown stays unknown
  Result<Snapshot> back = SnapshotFromJson(out);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value().jobs[0].remaining_s, 5400.5);
  nlohmann::json bad = in;
  bad["jobs"][0]["remaining_s"] = "soon";
  EXPECT_EQ(SnapshotFromJson(bad).status().message(), "jobs[0].remaining_s: expected a number");
}

TEST(Policy, InvalidSnapshotsAreRejected) {
  Snapshot s = TwoJobs();
  s.jobs[0].options[0].gpus = 3;
  s.jobs[0].gpu_step = 2;
  Result<Plan> r = MakePolicy("dp").value()->Solve(s, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "job 'a' option 1: 4 GPUs is outside [min_gpus, max_gpus] or off gpu_step");

  Snapshot dup = TwoJobs();
  dup.jobs[1].id = "a";
  EXPECT_EQ(Validate(dup).message(), "job 'a': id listed twice");

  Snapshot neg = TwoJobs();
  neg.jobs[0].remaining_s = -1.0;
  EXPECT_EQ(Validate(neg).message(), "job 'a': remaining_s must be within [0, 1e9]");
  PolicyOptions bad;
  bad.objective.srpt_exponent = std::nan("");
  EXPECT_EQ(MakePolicy("dp").value()->Solve(TwoJobs(), bad).status().kind(), ErrorKind::kInvalidArgument);
  bad.objective.srpt_exponent = 0.0;
  bad.objective.rescale_payback = std::numeric_limits<double>::infinity();
  EXPECT_EQ(MakePolicy("optimus").value()->Solve(TwoJobs(), bad).status().kind(), ErrorKind::kInvalidArgument);
}

TEST(Placement, WholeNodesFirstThenBestFit) {
  Cluster c;
  c.types = {{"a100", 3, 4}};
  Plan plan;
  plan.assignments = {{"x", false, "a100", 2, 0, 1.0, {}}, {"y", false, "a100", 6, 0, 1.0, {}},
                      {"z", false, "a100", 2, 0, 1.0, {}}};
  ASSERT_TRUE(Place(c, plan).ok());
  // y (largest) takes node 0 whole and 2 GPUs of node 1; x fills node 1; z goes to node 2.
  ASSERT_EQ(plan.assignments[1].placement.size(), 2U);
  EXPECT_EQ(plan.assignments[1].placement[0].node, 0);
  EXPECT_EQ(plan.assignments[1].placement[0].gpus, 4);
  EXPECT_EQ(plan.assignments[1].placement[1].gpus, 2);
  EXPECT_EQ(plan.assignments[0].placement.size(), 1U);
  EXPECT_EQ(plan.assignments[0].placement[0].node, plan.assignments[1].placement[1].node);
  EXPECT_EQ(plan.assignments[2].placement.size(), 1U);

  plan.assignments.push_back({"w", false, "a100", 4, 0, 1.0, {}});
  EXPECT_EQ(Place(c, plan).message(), "placement: plan uses 14 GPUs of type 'a100' which has 12");
}

}  // namespace
}  // namespace elastic::optimizer

namespace elastic::optimizer {
namespace {

TEST(Objectives, KeepRunningNeverLeavesARunningJobPending) {
  Snapshot s;
  s.cluster.types = {{"a100", 1, 4}};
  Job running;
  running.id = "old";
  running.state = JobState::kRunning;
  running.min_gpus = 4;
  running.max_gpus = 4;
  running.current = Configuration{"a100", 4, 0};
  running.options = {{"a100", 4, 0, 1.0}};
  Job better;
  better.id = "new";
  better.min_gpus = 4;
  better.max_gpus = 4;
  better.options = {{"a100", 4, 0, 5.0}};
  s.jobs = {running, better};
  for (const std::string& name : PolicyNames()) {
    PolicyOptions o;
    o.time_budget_ms = 20;
    Plan plan = MustSolve(name, s, o);
    if (name == "dp" || name == "greedy") {
      EXPECT_TRUE(plan.assignments[0].pending) << name << ": without keep_running the better job wins";
    }
    o.keep_running = true;
    plan = MustSolve(name, s, o);
    EXPECT_FALSE(plan.assignments[0].pending) << name;
    EXPECT_TRUE(plan.assignments[1].pending) << name;
    if (name != "pollux") {  // pollux reports its power-mean value
      EXPECT_NEAR(plan.objective, 1.0, 1e-9) << name << ": the bonus is not in the objective";
    }
    if (name == "dp") {
      EXPECT_NEAR(plan.bound, 1.0, 1e-9);
    }
  }
}

}  // namespace
}  // namespace elastic::optimizer
