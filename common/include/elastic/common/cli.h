// The prologue every command-line program shares: --help, --version and usage errors, with the
// exit statuses of exit_codes.h. Programs parsed with Boost.Program_options use cli_options.h.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace elastic::cli {

// How a program speaks about its command line.
struct Prologue {
  std::string program;     // every message starts "<program>: " ("elastic-sim study")
  std::string error_tail;  // after a usage error's message, its newline included (" (see --help)\n")
  std::string help_head;   // --help: printed before the options
  std::string help_tail;   // --help: printed after them
};

// Prints "<program>: <message><error_tail>" on standard error; returns kExitUsage.
int UsageError(const Prologue& p, std::string_view message);

// One argument of a hand-parsed command line: -h/--help prints `usage` on standard output,
// -V/--version prints "<program> <version>"; both end the program with the status returned
// (kExitOk). nullopt for any other argument.
std::optional<int> HelpOrVersion(std::string_view arg, std::string_view program, void (*usage)(std::FILE*));

}  // namespace elastic::cli
