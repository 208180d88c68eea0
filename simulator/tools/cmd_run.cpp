// elastic-sim [run]: one simulation.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "cli.h"
#include "elastic/common/cli_options.h"
#include "elastic/optimizer/policy.h"
#include "elastic/simulator/hetero.h"
#include "elastic/simulator/metrics.h"
#include "elastic/simulator/workload.h"

namespace elastic::simulator::cli {
namespace {

struct RunOptions {
  CommonOptions common;
  std::string workload;
  std::string format = "pollux";
  std::string policy = "dp";
  bool json = false;
  bool quiet = false;
  bool isolated = false;
  double horizon_s = 0.0;
  std::string jobs_csv;
  std::string out_dir;
  std::string philly_start;
  double philly_hours = 8.0;
  size_t philly_jobs = 0;
  std::string cluster;
  std::string sia_calibration = "on";
  std::string solver = "policy";
  int fuse = 0;
  double fuse_window_s = 600.0;
  std::string fuse_profile;
};

std::string Usage() {
  return "usage: elastic-sim [run] --workload FILE [--format pollux|philly|sacct] --policy NAME [options]\n"
         "       elastic-sim study [options]   (the reproduction study of docs/results.md; --help for its options)\n"
         "Replays a workload on a simulated GPU cluster with an optimizer policy in the loop.\n"
         "Policies: " + optimizer::PolicyNameList() + " (optimizer/), fifo (FIFO + EASY backfill).\n"
         "With --cluster FILE (several GPU types, docs/simulator.md): sia, dp (type-aware), pollux, optimus (type-unaware).\n"
         "  Every change costs the job's own restart time (Sia's); with --rescale stop-free a resize on the job's\n"
         "  type costs --grow-cost or --shrink-cost, a start or a move to another type a restart.\n"
         "  --restart-cost, --start-cost and --penalty-cost do not apply.\n"
         "Exit codes: 0 ok, 1 internal error, 2 bad command line, 3 bad input.\n";
}

void ProgressBar(double t, size_t done, size_t total) {
  const int width = 30;
  const int filled = total ? static_cast<int>(width * static_cast<double>(done) / static_cast<double>(total)) : width;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(static_cast<size_t>(width), '.');
  std::fprintf(stderr, "\r[%s] %zu/%zu jobs  t=%.1f h ", bar.c_str(), done, total, t / 3600.0);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

int WriteResults(const RunOptions& o, const SimResult& r, nlohmann::json extra) {
  const Summary s = Summarise(r, o.horizon_s);
  if (!o.jobs_csv.empty()) {
    std::ofstream f(o.jobs_csv);
    f << JobsCsv(r);
    if (!f) {
      std::cerr << "elastic-sim: " << o.jobs_csv << ": cannot write\n";
      return kExitBadInput;
    }
  }
  if (!o.out_dir.empty()) {
    Status st = WriteOutputs(r, s, o.out_dir, o.policy + " on " + o.workload);
    if (!st.ok()) std::cerr << "elastic-sim: warning: " << st.message() << "\n";
  }
  if (o.json) {
    nlohmann::json j = ToJson(s);
    j["policy"] = o.policy;
    j["workload"] = o.workload;
    if (o.isolated) j["isolated"] = true;
    for (auto& [k, v] : extra.items()) j[k] = v;
    std::cout << j.dump() << "\n";
  } else {
    std::printf("policy %s, %zu jobs%s, %zu finished%s\n", o.policy.c_str(), s.jobs, o.isolated ? " each alone" : "",
                s.jobs_finished, s.horizon_s > 0 ? " by the horizon" : "");
    std::printf("JCT: average %.0f s, median %.0f s, p99 %.0f s\n", s.avg_jct_s, s.median_jct_s, s.p99_jct_s);
    std::printf("makespan %.0f s, %.1f GPU-hours, utilisation %.1f%%, %.2f rescales per job\n", s.makespan_s,
                s.gpu_hours, 100.0 * s.utilisation, s.rescales_per_job);
  }
  return kExitOk;
}

// --cluster FILE: the simulator on several GPU types (hetero.h).
int RunHetero(const RunOptions& o, const SimConfig& config) {
  if (o.format != "pollux") {
    std::cerr << "elastic-sim: --cluster reads workloads in the pollux format only (Sia's workloads are), got --format "
              << o.format << "\n";
    return kExitUsage;
  }
  if (o.isolated) {
    std::cerr << "elastic-sim: --isolated is not available with --cluster\n";
    return kExitUsage;
  }
  if (config.model != ModelSource::kOracle || config.batch_frozen) {
    std::cerr << "elastic-sim: with --cluster the models are the oracle fits and the batch follows the policy: drop "
                 "--model and --batch\n";
    return kExitUsage;
  }
  if (o.policy == "sia" && (!config.objective.empty() || config.p != SimConfig{}.p || config.pending_penalty != 0.0)) {
    std::cerr << "elastic-sim: the sia policy has Sia's own objective: drop --objective, --p and --pending-penalty\n";
    return kExitUsage;
  }
  if (o.policy == "sia" && config.keep_running >= 0) {
    std::cerr << "elastic-sim: the sia policy preempts and keeps jobs as Sia's formulation does: drop --keep-running\n";
    return kExitUsage;
  }
  if (o.sia_calibration != "on" && o.sia_calibration != "off") {
    std::cerr << "elastic-sim: --sia-calibration: expected on or off, got '" << o.sia_calibration << "'\n";
    return kExitUsage;
  }
  if (o.solver != "policy" && o.solver != "exact") {
    std::cerr << "elastic-sim: --solver: expected policy or exact, got '" << o.solver << "'\n";
    return kExitUsage;
  }
  Result<ClusterSpec> cluster = ReadClusterFile(o.cluster);
  if (!cluster.ok()) {
    std::cerr << "elastic-sim: " << cluster.status().message() << "\n";
    return kExitBadInput;
  }
  std::vector<std::string> profiles;
  for (const ClusterType& t : cluster.value().types) {
    if (std::find(profiles.begin(), profiles.end(), t.profile) == profiles.end()) profiles.push_back(t.profile);
  }
  Result<TypedApps> apps = LoadTypedApplications(o.common.data_dir + "/sia-sosp23/traces", profiles);
  if (!apps.ok()) {
    std::cerr << "elastic-sim: " << apps.status().message() << "\n";
    return kExitBadInput;
  }
  Result<std::vector<JobSpec>> jobs = ReadPolluxWorkload(o.workload, apps.value().at(profiles.front()));
  if (!jobs.ok()) {
    std::cerr << "elastic-sim: " << jobs.status().message() << "\n";
    return kExitBadInput;
  }
  HeteroConfig hc;
  hc.cluster = cluster.value();
  hc.policy = o.policy;
  hc.period_s = config.period_s;
  hc.seed = config.seed;
  hc.weights = config.weights;
  hc.srpt_exponent = config.srpt_exponent;
  hc.rescale_payback = config.rescale_payback;
  hc.objective = config.objective;
  hc.p = config.p;
  hc.pending_penalty = config.pending_penalty;
  hc.time_budget_ms = config.time_budget_ms;
  hc.keep_running = config.keep_running;
  hc.rescale = {config.rescale, config.grow_cost_s, config.shrink_cost_s};
  hc.elastic_max_gpus = config.elastic_max_gpus;
  hc.sia_calibration = o.sia_calibration == "on";
  hc.exact = o.solver == "exact";
  if (!o.quiet && isatty(STDERR_FILENO)) hc.progress = ProgressBar;
  HeteroStats stats;
  Result<SimResult> r = SimulateHetero(apps.value(), jobs.value(), hc, &stats);
  if (!r.ok()) {
    std::cerr << "elastic-sim: " << r.status().message() << "\n";
    return r.status().kind() == ErrorKind::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  nlohmann::json extra;
  extra["cluster"] = o.cluster;
  double moves = 0.0;
  for (int m : stats.moves) moves += m;
  extra["moves_per_job"] = stats.moves.empty() ? 0.0 : moves / static_cast<double>(stats.moves.size());
  std::map<std::string, double> by_type;
  for (const auto& m : stats.gpu_seconds_by_type) {
    for (const auto& [t, s] : m) by_type[t] += s / 3600.0;
  }
  extra["gpu_hours_by_type"] = by_type;
  if (o.policy == "sia" || hc.exact) {
    extra["solves_mckp_exact"] = stats.solved_by_mckp;
    extra["solves_cbc"] = stats.solved_by_cbc;
    extra["solves_unproven"] = stats.unproven;
    if (stats.unproven > 0) {
      std::cerr << "elastic-sim: warning: " << stats.unproven
                << " epochs not proven optimal (CBC failed; the MCKP solver's plan was used): " << stats.cbc_error << "\n";
    }
  } else {
    extra["solves_with_gap"] = stats.inexact_solves;
    extra["max_gap"] = stats.max_gap;
  }
  return WriteResults(o, r.value(), extra);
}

}  // namespace

int RunSimulation(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  RunOptions o;
  po::options_description desc("options");
  desc.add_options()
      ("help,h", "show this help")
      ("workload", po::value(&o.workload), "workload file")
      ("format", po::value(&o.format)->default_value(o.format),
       "pollux (name,time,application,num_replicas,batch_size) | philly (traces/philly.csv) | sacct (sacct -P or sacct --json)")
      ("policy", po::value(&o.policy)->default_value(o.policy), "policy")
      ("json", po::bool_switch(&o.json), "print the summary as one JSON object")
      ("horizon", po::value(&o.horizon_s)->default_value(0.0), "count jobs finished by this time [s] (0: all)")
      ("jobs-csv", po::value(&o.jobs_csv), "write the per-job CSV here")
      ("out-dir", po::value(&o.out_dir), "write jobs.csv, epochs.csv, summary.json and SVG plots here")
      ("quiet,q", po::bool_switch(&o.quiet), "no progress bar")
      ("isolated", po::bool_switch(&o.isolated),
       "run every job alone on the empty cluster (its JCT without other jobs; with --horizon, how many jobs "
       "could finish by then)")
      ("philly-start", po::value(&o.philly_start), "philly: window start 'YYYY-MM-DD HH:MM:SS' (default: first job)")
      ("philly-hours", po::value(&o.philly_hours)->default_value(8.0), "philly: window length [h]")
      ("philly-jobs", po::value(&o.philly_jobs)->default_value(0), "philly: sample this many jobs (0: all)")
      ("cluster", po::value(&o.cluster),
       "a cluster of several GPU types described by FILE (lines: NAME NODES GPUS_PER_NODE PROFILE); step times "
       "from the Sia artifact (sia-sosp23/traces); replaces --nodes/--gpus-per-node")
      ("solver", po::value(&o.solver)->default_value(o.solver),
       "with --cluster, dp only: policy = the dp policy's own multi-type method, exact = proven optimal "
       "(MCKP solver, CBC where it proves no optimum)")
      ("sia-calibration", po::value(&o.sia_calibration)->default_value(o.sia_calibration),
       "with --cluster: on = jobs run slower by Sia's calibration factors (as Sia's simulator), off = as measured")
      ("fuse", po::value(&o.fuse)->default_value(0),
       "fused sweeps: train the trials of each sweep (one-GPU jobs of one submitter and model within --fuse-window; "
       "philly only) fused, at most N per GPU; the optimizer chooses each sweep's GPUs and trials per GPU (0: off)")
      ("fuse-window", po::value(&o.fuse_window_s)->default_value(o.fuse_window_s),
       "with --fuse: a sweep's trials arrive within this many seconds of its first")
      ("fuse-profile", po::value(&o.fuse_profile),
       "with --fuse: speedup of w fused trials on one GPU: cpu-mlp, cpu-cnn (measured here) or W:S,W:S,... "
       "(default: each model's own, from its one-GPU step times)");
  AddCommonOptions(desc, o.common);
  const elastic::cli::Prologue prologue{"elastic-sim", "\n" + Usage(), Usage(), ""};
  po::variables_map vm;
  if (std::optional<int> done = elastic::cli::ParseCommandLine(args, desc, vm, prologue)) return *done;
  if (o.workload.empty()) return elastic::cli::UsageError(prologue, "--workload is required");
  if (Status s = FinishCommonOptions(o.common); !s.ok()) {
    std::cerr << "elastic-sim: " << s.message() << "\n";
    return kExitUsage;
  }
  if (o.format != "pollux" && o.format != "philly" && o.format != "sacct") {
    std::cerr << "elastic-sim: --format: expected pollux, philly or sacct, got '" << o.format << "'\n";
    return kExitUsage;
  }
  SimConfig config = o.common.config;
  config.policy = o.policy;
  if (o.fuse < 0) {
    std::cerr << "elastic-sim: --fuse: expected 0 (off) or the most trials per GPU, got " << o.fuse << "\n";
    return kExitUsage;
  }
  if (o.fuse > 0) {
    if (o.format != "philly" || !o.cluster.empty() || o.isolated) {
      std::cerr << "elastic-sim: --fuse groups one-GPU jobs into sweeps by their submitter, which only --format philly "
                   "gives (its virtual clusters), on one GPU type, not --isolated\n";
      return kExitUsage;
    }
    if (!(o.fuse_window_s >= 0.0)) {
      std::cerr << "elastic-sim: --fuse-window: expected seconds >= 0, got " << o.fuse_window_s << "\n";
      return kExitUsage;
    }
    config.fuse_max_per_gpu = o.fuse;
    config.sweep_rule.window_s = o.fuse_window_s;
    config.fuse_profile = o.fuse_profile;
  } else if (!o.fuse_profile.empty() || !vm["fuse-window"].defaulted()) {
    std::cerr << "elastic-sim: --fuse-profile and --fuse-window need --fuse N\n";
    return kExitUsage;
  }
  if (!o.cluster.empty()) return RunHetero(o, config);
  Result<AppTable> apps = LoadPolluxApplications(o.common.data_dir + "/pollux-adaptdl-osdi21/traces");
  if (!apps.ok()) {
    std::cerr << "elastic-sim: " << apps.status().message() << "\n";
    return kExitBadInput;
  }
  Result<std::vector<JobSpec>> jobs = Status(ErrorKind::kInternal, "no reader");
  const int cap = config.nodes * config.gpus_per_node;
  if (o.format == "pollux") {
    jobs = ReadPolluxWorkload(o.workload, apps.value());
  } else if (o.format == "philly") {
    PhillyWindow w;
    w.start = o.philly_start;
    w.hours = o.philly_hours;
    w.max_jobs = o.philly_jobs;
    w.max_gpus = cap;
    w.seed = config.seed;
    jobs = ReadPhillyWindow(o.workload, w, apps.value());
  } else {
    jobs = ReadSacct(o.workload, apps.value(), cap, config.seed);
  }
  if (!jobs.ok()) {
    std::cerr << "elastic-sim: " << jobs.status().message() << "\n";
    return kExitBadInput;
  }
  if (!o.quiet && isatty(STDERR_FILENO)) config.progress = ProgressBar;
  Result<SimResult> r = o.isolated ? SimulateIsolated(apps.value(), jobs.value(), config)
                                   : Simulate(apps.value(), jobs.value(), config);
  if (!r.ok()) {
    std::cerr << "elastic-sim: " << r.status().message() << "\n";
    return r.status().kind() == ErrorKind::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  return WriteResults(o, r.value(), nlohmann::json::object());
}

}  // namespace elastic::simulator::cli
