// elastic-sim: replay a workload through the optimizer on a simulated GPU cluster, or run the
// reproduction study of docs/results.md.
#include <cmath>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "elastic/optimizer/policy.h"

namespace elastic::simulator::cli {

std::string DefaultDataDir() {
#ifdef ELASTIC_SOURCE_DIR
  return (std::filesystem::path(ELASTIC_SOURCE_DIR).parent_path() / "shared" / "data").string();
#else
  return "../shared/data";
#endif
}

void AddCommonOptions(boost::program_options::options_description& desc, CommonOptions& o) {
  namespace po = boost::program_options;
  SimConfig& c = o.config;
  desc.add_options()
      ("data-dir", po::value(&o.data_dir)->default_value(DefaultDataDir()), "benchmark data (../shared/data)")
      ("nodes", po::value(&c.nodes)->default_value(c.nodes), "nodes in the cluster")
      ("gpus-per-node", po::value(&c.gpus_per_node)->default_value(c.gpus_per_node), "GPUs per node")
      ("period", po::value(&c.period_s)->default_value(c.period_s), "scheduling epoch [s]")
      ("rescale", po::value(&o.rescale)->default_value(o.rescale), "rescale mechanism: restart | stop-free")
      ("restart-cost", po::value(&c.restart_cost_s)->default_value(c.restart_cost_s), "checkpoint-restart cost [s]")
      ("grow-cost", po::value(&c.grow_cost_s)->default_value(c.grow_cost_s), "stop-free grow pause [s]")
      ("shrink-cost", po::value(&c.shrink_cost_s)->default_value(c.shrink_cost_s), "stop-free shrink pause [s]")
      ("start-cost", po::value(&c.start_cost_s)->default_value(c.start_cost_s), "first start of a job [s]")
      ("penalty-cost", po::value(&c.penalty_cost_s)->default_value(c.penalty_cost_s),
       "rescale penalty in the objective [s] (<0: the mechanism's cost)")
      ("model", po::value(&o.model)->default_value(o.model), "goodput models fed from: oracle | observed")
      ("batch", po::value(&o.batch)->default_value(o.batch), "batch size: elastic | frozen (at the request)")
      ("objective", po::value(&c.objective)->default_value(""), "weighted-sum | power-mean (default: the policy's)")
      ("p", po::value(&c.p)->default_value(c.p), "power-mean exponent (< 0)")
      ("pending-penalty", po::value(&o.pending_penalty)->default_value(o.pending_penalty),
       "power mean: cost of a pending job: default (Sia's 1.1) | pollux (1000 / GPUs per node) | a number > 0")
      ("keep-running", po::value(&o.keep_running)->default_value(o.keep_running),
       "never preempt running jobs: auto (all but pollux) | on | off")
      ("weights", po::value(&o.weights)->default_value(o.weights),
       "job weights in the objective: uniform | remaining ((1 / remaining hours at the base size)^srpt-exponent, "
       "and the rescale penalty on the remaining time)")
      ("srpt-exponent", po::value(&c.srpt_exponent)->default_value(c.srpt_exponent),
       "with --weights remaining (ignored otherwise): exponent of 1 / remaining time (1: Smith's rule), |X| <= 2")
      ("rescale-payback", po::value(&c.rescale_payback)->default_value(c.rescale_payback),
       "with --weights remaining (ignored otherwise): a rescale must save this many times its cost over the job's "
       "remaining run, 0-1000, on top of Pollux's age-based penalty (0: that alone)")
      ("time-budget-ms", po::value(&c.time_budget_ms)->default_value(c.time_budget_ms), "solve time budget per epoch")
      ("max-gpus", po::value(&c.elastic_max_gpus)->default_value(0), "cap on an elastic job's GPUs (0: none)")
      ("seed", po::value(&c.seed)->default_value(c.seed), "seed (randomised policies, trace mapping)");
}

Status FinishCommonOptions(CommonOptions& o) {
  SimConfig& c = o.config;
  if (o.rescale == "restart") c.rescale = RescaleMode::kRestart;
  else if (o.rescale == "stop-free") c.rescale = RescaleMode::kStopFree;
  else return Status(ErrorKind::kInvalidArgument, "--rescale: expected restart or stop-free, got '" + o.rescale + "'");
  if (o.model == "oracle") c.model = ModelSource::kOracle;
  else if (o.model == "observed") c.model = ModelSource::kObserved;
  else return Status(ErrorKind::kInvalidArgument, "--model: expected oracle or observed, got '" + o.model + "'");
  if (o.batch == "elastic") c.batch_frozen = false;
  else if (o.batch == "frozen") c.batch_frozen = true;
  else return Status(ErrorKind::kInvalidArgument, "--batch: expected elastic or frozen, got '" + o.batch + "'");
  if (o.pending_penalty == "default") {
    c.pending_penalty = 0.0;
  } else if (o.pending_penalty == "pollux") {
    c.pending_penalty = -1.0;
  } else {
    char* end = nullptr;
    c.pending_penalty = std::strtod(o.pending_penalty.c_str(), &end);
    if (end == o.pending_penalty.c_str() || *end != '\0' || !(c.pending_penalty > 0.0)) {
      return Status(ErrorKind::kInvalidArgument,
                    "--pending-penalty: expected default, pollux or a number > 0, got '" + o.pending_penalty + "'");
    }
  }
  if (o.keep_running == "auto") c.keep_running = -1;
  else if (o.keep_running == "on") c.keep_running = 1;
  else if (o.keep_running == "off") c.keep_running = 0;
  else return Status(ErrorKind::kInvalidArgument, "--keep-running: expected auto, on or off, got '" + o.keep_running + "'");
  if (o.weights == "uniform") c.weights = JobWeights::kUniform;
  else if (o.weights == "remaining") c.weights = JobWeights::kRemaining;
  else return Status(ErrorKind::kInvalidArgument, "--weights: expected uniform or remaining, got '" + o.weights + "'");
  if (c.nodes < 1 || c.gpus_per_node < 1) return Status(ErrorKind::kInvalidArgument, "--nodes and --gpus-per-node must be >= 1");
  if (!(c.period_s > 0.0)) return Status(ErrorKind::kInvalidArgument, "--period must be > 0");
  if (c.restart_cost_s < 0 || c.grow_cost_s < 0 || c.shrink_cost_s < 0 || c.start_cost_s < 0) {
    return Status(ErrorKind::kInvalidArgument, "rescale costs must be >= 0");
  }
  if (!(c.p < 0.0)) return Status(ErrorKind::kInvalidArgument, "--p must be < 0");
  if (!(std::abs(c.srpt_exponent) <= optimizer::kMaxSrptExponent)) {
    return Status(ErrorKind::kInvalidArgument, "--srpt-exponent must be within [-2, 2]");
  }
  if (!(c.rescale_payback >= 0.0 && c.rescale_payback <= optimizer::kMaxRescalePayback)) {
    return Status(ErrorKind::kInvalidArgument, "--rescale-payback must be within [0, 1000]");
  }
  if (!(c.time_budget_ms > 0.0)) return Status(ErrorKind::kInvalidArgument, "--time-budget-ms must be > 0");
  return Status::Ok();
}

}  // namespace elastic::simulator::cli

int main(int argc, char** argv) {
  using namespace elastic::simulator::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty() && args.front() == "study") {
      args.erase(args.begin());
      return RunStudy(args);
    }
    if (!args.empty() && args.front() == "run") args.erase(args.begin());
    return RunSimulation(args);
  } catch (const std::exception& e) {
    std::cerr << "elastic-sim: error: " << e.what() << "\n";
    return elastic::kExitFailure;
  }
}
