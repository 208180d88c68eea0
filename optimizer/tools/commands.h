// elastic-optimize subcommands: one file each (cmd_solve.cpp, cmd_bench.cpp).
#pragma once

#include <string>
#include <vector>

#include "elastic/common/exit_codes.h"

namespace elastic::optimizer::cli {

// Exit codes of elastic-optimize (docs/optimizer.md): kExitOk, kExitFailure (an unexpected
// internal error), kExitUsage (bad command line), kExitBadInput (the input file is missing, not
// JSON, or not a valid snapshot).

int RunSolve(const std::vector<std::string>& args);
int RunBench(const std::vector<std::string>& args);

}  // namespace elastic::optimizer::cli
