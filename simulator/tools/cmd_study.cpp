// elastic-sim study: the reproduction study of docs/results.md. Runs every (load, workload,
// policy variant, rescale mechanism) simulation on a thread pool and prints one JSON line per
// run, then one aggregate line per (load, variant, mechanism) with Pollux's published figures.
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "cli.h"
#include "elastic/common/cli_options.h"
#include "elastic/simulator/metrics.h"
#include "elastic/simulator/workload.h"

namespace elastic::simulator::cli {
namespace {

// A study variant: POLICY[-pm][-srpt][-frozen]. -pm: the power mean (p = -1) with Pollux's cost of
// a pending job (the objective the pollux policy searches, here solved by POLICY); -srpt: job
// weights (1 / remaining time)^srpt_exponent and the remaining-time rescale penalty
// (JobWeights::kRemaining); -frozen: batch frozen at the request.
struct Variant {
  std::string label;
  std::string policy;
  bool frozen = false;
  bool srpt = false;
  bool pm = false;
};

bool StripSuffix(std::string& s, const std::string& suffix) {
  if (s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0) {
    s.resize(s.size() - suffix.size());
    return true;
  }
  return false;
}

Variant ParseVariant(const std::string& label) {
  Variant v{label, label, false, false, false};
  v.frozen = StripSuffix(v.policy, "-frozen");
  v.srpt = StripSuffix(v.policy, "-srpt");
  v.pm = StripSuffix(v.policy, "-pm");
  return v;
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

// Pollux's published mean of per-workload average JCTs (results-jobload/<policy>-<load>).
double Published(const std::string& data_dir, const std::string& policy, const std::string& load) {
  std::ifstream f(data_dir + "/pollux-adaptdl-osdi21/results-jobload/" + policy + "-" + load + "/summary.json");
  if (!f) return -1.0;
  try {
    nlohmann::json j = nlohmann::json::parse(f);
    return j.at("mean").get<double>();
  } catch (const std::exception&) {
    return -1.0;
  }
}

}  // namespace

int RunStudy(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  CommonOptions common;
  std::string loads = "1.0,2.0", policies = "dp,dp-frozen,dp-srpt,dp-srpt-frozen,greedy,evolutionary,pollux,optimus,static,fifo",
              mechanisms = "restart,stop-free";
  int workloads = 8;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  double horizon = 8 * 3600.0;
  po::options_description desc("elastic-sim study options");
  desc.add_options()
      ("help,h", "show this help")
      ("loads", po::value(&loads)->default_value(loads), "job loads (workloads/ for 1.0, workloads-L/ otherwise)")
      ("policies", po::value(&policies)->default_value(policies), "policy variants POLICY[-pm][-srpt][-frozen]: -pm the power mean with Pollux's cost of a pending job, -srpt weights jobs by (1 / remaining time)^--srpt-exponent with the remaining-time rescale penalty (--rescale-payback), -frozen freezes the batch")
      ("mechanisms", po::value(&mechanisms)->default_value(mechanisms), "rescale mechanisms (restart, stop-free)")
      ("workloads", po::value(&workloads)->default_value(workloads), "workload-1 .. workload-N")
      ("threads", po::value(&threads)->default_value(threads), "simulations in parallel")
      ("horizon", po::value(&horizon)->default_value(horizon), "jobs_finished counts jobs done by then [s]");
  AddCommonOptions(desc, common);
  const elastic::cli::Prologue prologue{"elastic-sim study", "\n", "usage: elastic-sim study [options]\n", ""};
  po::variables_map vm;
  if (std::optional<int> done = elastic::cli::ParseCommandLine(args, desc, vm, prologue)) return *done;
  if (Status s = FinishCommonOptions(common); !s.ok()) return elastic::cli::UsageError(prologue, s.message());
  Result<AppTable> apps = LoadPolluxApplications(common.data_dir + "/pollux-adaptdl-osdi21/traces");
  if (!apps.ok()) {
    std::cerr << "elastic-sim study: " << apps.status().message() << "\n";
    return kExitBadInput;
  }
  struct Run {
    std::string load, workload, mechanism;
    Variant variant;
    std::vector<JobSpec> jobs;
    Summary summary;
    bool ok = false;
    std::string error;
  };
  std::vector<Run> runs;
  for (const std::string& load : SplitList(loads)) {
    const std::string dir = common.data_dir + "/pollux-adaptdl-osdi21/" + (load == "1.0" ? "workloads" : "workloads-" + load);
    for (int w = 1; w <= workloads; ++w) {
      const std::string name = "workload-" + std::to_string(w);
      Result<std::vector<JobSpec>> jobs = ReadPolluxWorkload(dir + "/" + name + ".csv", apps.value());
      if (!jobs.ok()) {
        std::cerr << "elastic-sim study: " << jobs.status().message() << "\n";
        return kExitBadInput;
      }
      for (const std::string& m : SplitList(mechanisms)) {
        if (m != "restart" && m != "stop-free") {
          std::cerr << "elastic-sim study: --mechanisms: unknown '" << m << "'\n";
          return kExitUsage;
        }
        for (const std::string& p : SplitList(policies)) runs.push_back({load, name, m, ParseVariant(p), jobs.value(), {}, false, ""});
      }
    }
  }
  // Expensive runs first so the pool ends evenly.
  std::stable_sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) {
    auto cost = [](const Run& r) { return (r.variant.policy == "pollux" ? 4 : r.variant.policy == "evolutionary" ? 2 : 1) * (r.load == "1.0" ? 1 : 2); };
    return cost(a) > cost(b);
  });
  std::atomic<size_t> next{0};
  std::mutex out_mu;
  auto worker = [&]() {
    for (size_t i = next++; i < runs.size(); i = next++) {
      Run& r = runs[i];
      SimConfig c = common.config;
      c.policy = r.variant.policy;
      c.batch_frozen = r.variant.frozen;
      if (r.variant.srpt) c.weights = JobWeights::kRemaining;
      if (r.variant.pm) {
        c.objective = "power-mean";
        c.p = -1.0;
        c.pending_penalty = -1.0;  // Pollux's
      }
      c.rescale = r.mechanism == "restart" ? RescaleMode::kRestart : RescaleMode::kStopFree;
      Result<SimResult> res = Simulate(apps.value(), r.jobs, c);
      std::lock_guard<std::mutex> lock(out_mu);
      if (!res.ok()) {
        r.error = res.status().message();
        std::cerr << "elastic-sim study: " << r.variant.label << " " << r.load << " " << r.workload << ": " << r.error << "\n";
        continue;
      }
      r.summary = Summarise(res.value(), horizon);
      r.ok = true;
      nlohmann::json j = ToJson(r.summary);
      j["kind"] = "run";
      j["load"] = r.load;
      j["workload"] = r.workload;
      j["policy"] = r.variant.label;
      j["mechanism"] = r.mechanism;
      if (r.variant.srpt) {
        j["srpt_exponent"] = c.srpt_exponent;
        j["rescale_payback"] = c.rescale_payback;
      }
      std::cout << j.dump() << std::endl;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::max(1u, threads); ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  // Aggregates: mean over workloads of each run's figures.
  int failures = 0;
  for (const std::string& load : SplitList(loads)) {
    for (const std::string& m : SplitList(mechanisms)) {
      for (const std::string& p : SplitList(policies)) {
        double avg = 0, p99 = 0, fin = 0, fin_all = 0, gpu_h = 0, util = 0, resc = 0, wall = 0, mk = 0;
        int n = 0;
        for (const Run& r : runs) {
          if (r.load != load || r.mechanism != m || r.variant.label != p) continue;
          if (!r.ok) {
            ++failures;
            continue;
          }
          ++n;
          avg += r.summary.avg_jct_s;
          p99 += r.summary.p99_jct_s;
          fin += static_cast<double>(r.summary.jobs_finished);
          fin_all += static_cast<double>(r.summary.jobs_finished_all);
          gpu_h += r.summary.gpu_hours;
          util += r.summary.utilisation;
          resc += r.summary.rescales_per_job;
          wall += r.summary.wall_ms;
          mk += r.summary.makespan_s;
        }
        if (n == 0) continue;
        const double k = n;
        nlohmann::json j;
        j["kind"] = "mean";
        j["load"] = load;
        j["policy"] = p;
        j["mechanism"] = m;
        j["workloads"] = n;
        j["avg_jct_s"] = avg / k;
        j["p99_jct_s"] = p99 / k;
        j["makespan_s"] = mk / k;
        j["jobs_finished"] = fin / k;
        j["jobs_finished_all"] = fin_all / k;
        j["gpu_hours"] = gpu_h / k;
        j["utilisation"] = util / k;
        j["rescales_per_job"] = resc / k;
        j["wall_s_total"] = wall / 1000.0;
        if (ParseVariant(p).srpt) {
          j["srpt_exponent"] = common.config.srpt_exponent;
          j["rescale_payback"] = common.config.rescale_payback;
        }
        const std::string pub = p == "pollux" || p == "optimus" ? p : std::string();
        if (!pub.empty()) {
          const double v = Published(common.data_dir, pub, load);
          if (v > 0) {
            j["published_policy"] = pub;
            j["published_avg_jct_s"] = v;
          }
        }
        std::cout << j.dump() << std::endl;
      }
    }
  }
  return failures ? kExitFailure : kExitOk;
}

}  // namespace elastic::simulator::cli
