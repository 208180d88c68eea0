#include "elastic/common/cli_options.h"

#include <iostream>

#include "elastic/common/exit_codes.h"

namespace elastic::cli {

namespace po = boost::program_options;

std::optional<int> ParseCommandLine(const std::vector<std::string>& args, const po::options_description& desc,
                                    po::variables_map& vm, const Prologue& p) {
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return UsageError(p, e.what());
  }
  if (vm.count("help")) {
    std::cout << p.help_head << desc << p.help_tail;
    return kExitOk;
  }
  return std::nullopt;
}

}  // namespace elastic::cli
