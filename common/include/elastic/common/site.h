// Where the controller is, found the way Slurm's own commands find their configuration:
// slurm.conf ($SLURM_CONF or /etc/slurm/slurm.conf) names plugstack.conf (PlugStackConfig),
// whose line for elastic.so carries controller=HOST:PORT and munge_socket=PATH
// (docs/interfaces.md, section 1). Used by elasticctl, elastic-report and elasticd --check-config.
#pragma once

#include <string>

#include "elastic/common/config.h"
#include "elastic/common/error.h"

namespace elastic::config {

struct SiteAddress {
  HostPort controller;
  std::string munge_socket;  // empty: munge's default
  std::string plugstack;     // the file the line was found in
};

// `slurm_conf` empty: $SLURM_CONF, else /etc/slurm/slurm.conf. kNotFound when no
// plugstack.conf line loads elastic.so with a controller= argument, naming the files read.
Result<SiteAddress> FindSiteAddress(const std::string& slurm_conf = "");

}  // namespace elastic::config
