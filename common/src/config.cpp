#include "elastic/common/config.h"

#include <algorithm>
#include <charconv>
#include <set>

namespace elastic::config {
namespace {

Status Invalid(std::string message) { return Status(ErrorKind::kInvalidArgument, std::move(message)); }

std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += '?';  // never echo control characters back to a terminal or a log
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

}  // namespace

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<int64_t> ParseInt(std::string_view text, int64_t min, int64_t max, std::string_view what) {
  if (text.empty()) return Invalid(std::string(what) + ": empty value, expected an integer");
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Invalid(std::string(what) + ": " + Quote(text) + " is not a non-negative integer");
  }
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range || v > max) {
    return Invalid(std::string(what) + ": " + Quote(text) + " is too large (at most " + std::to_string(max) + ")");
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return Invalid(std::string(what) + ": " + Quote(text) + " is not an integer");
  }
  if (v < min) {
    return Invalid(std::string(what) + ": " + Quote(text) + " is too small (at least " + std::to_string(min) + ")");
  }
  return v;
}

Result<bool> ParseBool(std::string_view text, std::string_view what) {
  if (text == "1" || text == "yes" || text == "true" || text == "on") return true;
  if (text == "0" || text == "no" || text == "false" || text == "off") return false;
  return Invalid(std::string(what) + ": " + Quote(text) + " is not a boolean (use 1 or 0)");
}

Result<HostPort> ParseHostPort(std::string_view text, std::string_view what) {
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Invalid(std::string(what) + ": " + Quote(text) + " is not HOST:PORT");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) {
      return Invalid(std::string(what) + ": " + Quote(text) + " is not HOST:PORT");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) return Invalid(std::string(what) + ": " + Quote(text) + " has no host");
  for (char c : host) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '-' || c == ':' || c == '_';
    if (!ok) return Invalid(std::string(what) + ": host " + Quote(host) + " has a character not allowed in a host name");
  }
  auto p = ParseInt(port, 1, 65535, std::string(what) + " port");
  if (!p.ok()) return p.status();
  return HostPort{std::string(host), static_cast<uint16_t>(p.value())};
}

Result<std::vector<std::string>> ParseList(std::string_view text, std::string_view what) {
  std::vector<std::string> items;
  std::set<std::string, std::less<>> seen;
  if (text.empty()) return Invalid(std::string(what) + ": empty list");
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) return Invalid(std::string(what) + ": " + Quote(text) + " has an empty item");
    if (!seen.insert(std::string(item)).second) {
      return Invalid(std::string(what) + ": " + Quote(item) + " is listed twice");
    }
    items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

Result<std::string> ParseChoice(std::string_view text, const std::vector<std::string>& allowed,
                                std::string_view what) {
  for (const auto& a : allowed) {
    if (a == text) return a;
  }
  std::string list;
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (i) list += i + 1 == allowed.size() ? " or " : ", ";
    list += allowed[i];
  }
  return Invalid(std::string(what) + ": " + Quote(text) + " is not one of " + list);
}

Status ParseKeyValueArgs(std::span<const std::string> args, const std::vector<KeySpec>& table) {
  std::set<std::string, std::less<>> given;
  for (const std::string& arg : args) {
    auto eq = arg.find('=');
    if (eq == std::string::npos) {
      return Invalid("argument " + Quote(arg) + " is not key=value");
    }
    std::string_view key(arg.data(), eq);
    std::string_view value(arg.data() + eq + 1, arg.size() - eq - 1);
    auto spec = std::find_if(table.begin(), table.end(), [&](const KeySpec& k) { return k.key == key; });
    if (spec == table.end()) {
      std::string known;
      for (const auto& k : table) known += (known.empty() ? "" : ", ") + k.key;
      return Invalid("unknown key " + Quote(key) + " (known keys: " + known + ")");
    }
    if (!given.insert(std::string(key)).second) return Invalid("key " + Quote(key) + " is given twice");
    if (value.empty()) return Invalid(std::string(key) + ": empty value");
    Status s = spec->apply(value);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace elastic::config
