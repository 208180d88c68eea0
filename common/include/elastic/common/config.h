// Strict configuration parsing shared by the plugin (plugstack.conf arguments) and the daemons
// (INI files, see ini.h).
//
// Every parser refuses what it does not understand with a message that says what was wrong and
// what is allowed; nothing is silently ignored or defaulted on bad input.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::config {

// A TCP endpoint "HOST:PORT" (IPv6 literals as "[::1]:PORT").
struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const;
  bool operator==(const HostPort&) const = default;
};

// Decimal integer in [min, max]; no sign, no spaces, no leading '+', no trailing garbage.
// `what` names the value in messages, e.g. "max_gpus".
Result<int64_t> ParseInt(std::string_view text, int64_t min, int64_t max, std::string_view what);
// 1/0, yes/no, true/false, on/off (lower case).
Result<bool> ParseBool(std::string_view text, std::string_view what);
Result<HostPort> ParseHostPort(std::string_view text, std::string_view what);
// Comma-separated non-empty items, e.g. "gpu,debug"; refuses empty items and duplicates.
Result<std::vector<std::string>> ParseList(std::string_view text, std::string_view what);
// One of `allowed`.
Result<std::string> ParseChoice(std::string_view text, const std::vector<std::string>& allowed,
                                std::string_view what);

// A table of known keys for "key=value" argument lists (plugstack.conf plugin arguments).
struct KeySpec {
  std::string key;
  std::string help;  // one line, shown in messages and docs
  // Applies a value; returns a Status explaining a bad value.
  std::function<Status(std::string_view value)> apply;
};

// Parses every argument of the form key=value against `table`. Refuses arguments without '=',
// unknown keys (naming the known ones), empty values and keys given twice. Stops at the first
// error and returns it; `table` entries are applied in argument order.
Status ParseKeyValueArgs(std::span<const std::string> args, const std::vector<KeySpec>& table);

}  // namespace elastic::config
