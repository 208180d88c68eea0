#include "site_config.h"

namespace elastic::spank {
namespace {

const std::vector<std::string>& LrRules() {
  static const std::vector<std::string> rules{"none", "linear", "sqrt", "adascale"};
  return rules;
}

std::vector<config::KeySpec> Table(SiteConfig& c) {
  using config::KeySpec;
  auto from = [](auto result, auto assign) -> Status {
    if (!result.ok()) return result.status();
    assign(std::move(result).value());
    return Status::Ok();
  };
  return {
      KeySpec{"enabled", "1: elastic jobs are scheduled elastically; 0: elastic flags are accepted and jobs run rigid",
              [&](std::string_view v) { return from(config::ParseBool(v, "enabled"), [&](bool b) { c.enabled = b; }); }},
      KeySpec{"controller", "HOST:PORT where elasticd listens (required when enabled=1)",
              [&](std::string_view v) {
                return from(config::ParseHostPort(v, "controller"), [&](config::HostPort h) { c.controller = h; });
              }},
      KeySpec{"max_gpus", "largest MAX of --elastic-gpus (default 1024)",
              [&](std::string_view v) {
                return from(config::ParseInt(v, 1, 100000, "max_gpus"), [&](int64_t n) { c.max_gpus = n; });
              }},
      KeySpec{"max_batch", "largest MAX of --elastic-batch (default: no limit)",
              [&](std::string_view v) {
                return from(config::ParseInt(v, 1, 1000000000, "max_batch"), [&](int64_t n) { c.max_batch = n; });
              }},
      KeySpec{"partitions", "comma-separated partitions where elastic jobs may run (default: all)",
              [&](std::string_view v) {
                return from(config::ParseList(v, "partitions"), [&](std::vector<std::string> p) { c.partitions = p; });
              }},
      KeySpec{"default_lr_scaling", "learning-rate rule when the job gives none: none, linear, sqrt or adascale",
              [&](std::string_view v) {
                return from(config::ParseChoice(v, LrRules(), "default_lr_scaling"),
                            [&](std::string s) { c.default_lr_scaling = s; });
              }},
      KeySpec{"register_timeout", "seconds to wait for elasticd when a job starts, 1-60 (default 5)",
              [&](std::string_view v) {
                return from(config::ParseInt(v, 1, 60, "register_timeout"),
                            [&](int64_t n) { c.register_timeout_ms = n * 1000; });
              }},
      KeySpec{"gpu_types", "comma-separated GPU types --elastic-gpu-types may name (default: the types of the nodes' GRES)",
              [&](std::string_view v) {
                return from(config::ParseList(v, "gpu_types"), [&](std::vector<std::string> t) { c.gpu_types = t; });
              }},
      KeySpec{"munge_socket", "path of munged's socket (default: munge's own)",
              [&](std::string_view v) -> Status {
                if (v.front() != '/') {
                  return Status(ErrorKind::kInvalidArgument, "munge_socket: '" + std::string(v) + "' is not an absolute path");
                }
                c.munge_socket = std::string(v);
                return Status::Ok();
              }},
  };
}

}  // namespace

std::vector<std::pair<std::string, std::string>> SiteConfigKeys() {
  SiteConfig scratch;
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& k : Table(scratch)) keys.emplace_back(k.key, k.help);
  return keys;
}

Result<SiteConfig> ParseSiteConfig(std::span<const std::string> args) {
  SiteConfig c;
  Status s = config::ParseKeyValueArgs(args, Table(c));
  if (!s.ok()) return Status(ErrorKind::kConfig, "plugstack.conf: " + s.message());
  if (c.enabled && !c.controller) {
    return Status(ErrorKind::kConfig, "plugstack.conf: controller=HOST:PORT is required (or enabled=0)");
  }
  return c;
}

}  // namespace elastic::spank
