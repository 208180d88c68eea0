#include "elastic/common/cli.h"

#include <iostream>

#include "elastic/common/exit_codes.h"
#include "elastic/common/version.h"

namespace elastic::cli {

int UsageError(const Prologue& p, std::string_view message) {
  std::cerr << p.program << ": " << message << p.error_tail << std::flush;
  return kExitUsage;
}

std::optional<int> HelpOrVersion(std::string_view arg, std::string_view program, void (*usage)(std::FILE*)) {
  if (arg == "-h" || arg == "--help") {
    usage(stdout);
    return kExitOk;
  }
  if (arg == "-V" || arg == "--version") {
    std::printf("%.*s %s\n", static_cast<int>(program.size()), program.data(), ELASTIC_VERSION_STRING);
    return kExitOk;
  }
  return std::nullopt;
}

}  // namespace elastic::cli
