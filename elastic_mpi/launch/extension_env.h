// The environment elastic-launch registers with elasticd for the job's extensions: the job's own,
// but for what belongs to one launch, node or allocation (docs/interfaces.md section 4, "What it
// runs"; the rule itself: common/include/elastic/common/env_vars.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace elastic::launch {

// What goes with the registration, at most this many bytes of names and values: elasticd takes
// messages of up to 512 KiB (wire.h), the rest of the registration is small.
inline constexpr std::size_t kMaxExtensionEnvBytes = 256 * 1024;

struct ExtensionEnv {
  nlohmann::json vars = nlohmann::json::object();  // name -> value
  std::vector<std::string> left_out;               // too large to carry: the largest went first
};

// From `environ` (NAME=value entries): every variable CarriedToExtensionsByDefault, and the
// `exports` named even if they are not, but never one NeverCarriedToExtensions. When the whole is
// larger than `max_bytes`, the largest variables are left out until it fits.
ExtensionEnv ExtensionEnvironment(char** environ_entries, const std::vector<std::string>& exports,
                                  std::size_t max_bytes = kMaxExtensionEnvBytes);

}  // namespace elastic::launch
