// elastic-sim command-line: shared option handling of the subcommands.
#pragma once

#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "elastic/common/exit_codes.h"
#include "elastic/simulator/simulator.h"

namespace elastic::simulator::cli {

// Exit codes: kExitOk, kExitFailure (internal error), kExitUsage (bad command line),
// kExitBadInput (input file missing or malformed).

// The options every subcommand shares (cluster, costs, policy knobs) and their parsed values.
struct CommonOptions {
  std::string data_dir;  // default: ../shared/data relative to the repository
  std::string rescale = "restart";
  std::string model = "oracle";
  std::string batch = "elastic";
  std::string keep_running = "auto";
  std::string pending_penalty = "default";
  std::string weights = "uniform";
  SimConfig config;
};

void AddCommonOptions(boost::program_options::options_description& desc, CommonOptions& o);
// Validates the parsed strings into o.config; kInvalidArgument naming the option.
Status FinishCommonOptions(CommonOptions& o);
std::string DefaultDataDir();

int RunSimulation(const std::vector<std::string>& args);
int RunStudy(const std::vector<std::string>& args);

}  // namespace elastic::simulator::cli
