// Every environment variable and tunable the runtime reads, declared in one table.
//
// The runtime never calls getenv() anywhere else: Config::FromEnvironment() reads the variables of
// this table once, and the rest of the library parses typed values out of a Config. Tests build a
// Config from a map instead of the environment.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "elastic/common/error.h"

namespace elastic::mpi {

// One row of the table: a short name used in code and docs, the environment variable, the default
// value as text ("" = unset), and one line of help.
struct Tunable {
  std::string_view name;
  std::string_view env;
  std::string_view default_value;
  std::string_view help;
};

// The table itself (docs/runtime.md reproduces it). Order is only for documentation.
std::span<const Tunable> Tunables() noexcept;

// Values of the table, as text, after precedence (explicit set > environment > default).
class Config {
 public:
  // Reads every variable of the table from the process environment. Unknown names never appear.
  static Config FromEnvironment();
  // Builds a config from explicit values by env name ("ELASTIC_SCHEDULE" -> "2->4"); names
  // that are not in the table are rejected with kInvalidArgument.
  static Result<Config> FromMap(const std::map<std::string, std::string>& values);

  // Text value by tunable name ("schedule"), default applied; throws elastic::Error(kInternal)
  // for a name that is not in the table (a bug in the caller).
  std::string Get(std::string_view name) const;
  // True when the value came from the environment or an explicit Set, not the default.
  bool IsSet(std::string_view name) const;
  // Overrides one value (e.g. from a program's command line). kInvalidArgument for unknown names.
  Status Set(std::string_view name, std::string value);

  // Typed accessors: parse Get(name); a malformed value gives kConfig naming the variable.
  Result<double> GetDouble(std::string_view name) const;
  Result<std::int64_t> GetInt(std::string_view name) const;
  Result<bool> GetBool(std::string_view name) const;  // 1/0, true/false, yes/no, on/off

 private:
  std::map<std::string, std::string, std::less<>> values_;  // by tunable name; only set ones
};

}  // namespace elastic::mpi
