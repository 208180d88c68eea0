// The prologue of a command line parsed with Boost.Program_options (cli.h for the rest).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "elastic/common/cli.h"

namespace elastic::cli {

// Parses `args` (without the program name) against `desc` into `vm`. Returns the status to end
// the program with when the command line is bad (kExitUsage, after UsageError with the parser's
// message) or asks for --help (kExitOk, after help_head, the options and help_tail on standard
// output); nullopt when the program goes on.
std::optional<int> ParseCommandLine(const std::vector<std::string>& args,
                                    const boost::program_options::options_description& desc,
                                    boost::program_options::variables_map& vm, const Prologue& p);

}  // namespace elastic::cli
