#include "extension_env.h"

#include <algorithm>
#include <utility>

#include "elastic/common/env_vars.h"

namespace elastic::launch {

ExtensionEnv ExtensionEnvironment(char** environ_entries, const std::vector<std::string>& exports,
                                  std::size_t max_bytes) {
  std::vector<std::pair<std::string, std::string>> kept;
  std::size_t bytes = 0;
  for (char** e = environ_entries; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    bool keep = contract::CarriedToExtensionsByDefault(name);
    keep = keep || std::find(exports.begin(), exports.end(), name) != exports.end();
    if (!keep || contract::NeverCarriedToExtensions(name)) continue;
    bytes += kv.size();
    kept.emplace_back(std::move(name), kv.substr(eq + 1));
  }
  ExtensionEnv out;
  if (bytes > max_bytes) {
    std::stable_sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
      return a.first.size() + a.second.size() > b.first.size() + b.second.size();
    });
    auto it = kept.begin();
    for (; it != kept.end() && bytes > max_bytes; ++it) {
      bytes -= it->first.size() + 1 + it->second.size();
      out.left_out.push_back(it->first);
    }
    kept.erase(kept.begin(), it);
  }
  for (auto& [name, value] : kept) out.vars[name] = std::move(value);
  return out;
}

}  // namespace elastic::launch
