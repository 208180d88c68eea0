// elastic-optimize subcommands: one file each (cmd_solve.cpp, cmd_bench.cpp).
#pragma once

#include <string>
#include <vector>

namespace elastic::optimizer::cli {

// Exit codes of elastic-optimize (docs/optimizer.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,  // an unexpected internal error
  kExitUsage = 2,    // bad command line
  kExitInput = 3,    // the input file is missing, not JSON, or not a valid snapshot
};

int RunSolve(const std::vector<std::string>& args);
int RunBench(const std::vector<std::string>& args);

}  // namespace elastic::optimizer::cli
