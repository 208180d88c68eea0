// The site's settings for the plugin: the arguments of its plugstack.conf line, e.g.
//   required /usr/lib/.../elastic.so controller=ctl:6820 max_gpus=64 partitions=gpu
// Parsed strictly: an unknown key or a bad value keeps the plugin from loading.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "elastic/common/config.h"
#include "elastic/common/error.h"

namespace elastic::spank {

struct SiteConfig {
  bool enabled = true;                              // enabled=0|1
  std::optional<config::HostPort> controller;       // controller=HOST:PORT (required when enabled)
  int64_t max_gpus = 1024;                          // max_gpus=N: largest MAX of --elastic-gpus
  std::optional<int64_t> max_batch;                 // max_batch=N: largest MAX of --elastic-batch
  std::vector<std::string> partitions;              // partitions=a,b: where elastic jobs may run (empty: all)
  std::string default_lr_scaling = "none";          // default_lr_scaling=none|linear|sqrt|adascale
  int64_t register_timeout_ms = 5000;               // register_timeout=SECONDS (1-60)
  std::string munge_socket;                         // munge_socket=PATH (default: munge's own)
  std::vector<std::string> gpu_types;               // gpu_types=a100,v100: the cluster's GPU types
                                                    // (default: those of slurmctld's node table)
};

// The keys, with one line of help each (for messages and the man page).
std::vector<std::pair<std::string, std::string>> SiteConfigKeys();

// Parses plugstack.conf arguments into a SiteConfig (defaults for keys not given).
Result<SiteConfig> ParseSiteConfig(std::span<const std::string> args);

}  // namespace elastic::spank
