// The session's options: the standalone schedule's text form, and SessionOptions from the
// ELASTIC_* table (tunables.h), each malformed value refused with the variable's name.
#include <cstdio>
#include <optional>

#include "elastic_mpi/session.h"

namespace elastic::mpi {

Result<std::vector<ScheduleEntry>> ParseSchedule(std::string_view text) {
  std::vector<ScheduleEntry> out;
  if (text.empty()) return out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t arrow = text.find("->", pos);
    const std::string item(text.substr(pos, arrow == std::string_view::npos ? text.npos : arrow - pos));
    ScheduleEntry e;
    char extra = 0;
    long long size = 0;
    unsigned long long batch = 0;
    const int n = std::sscanf(item.c_str(), "%lld:%llu%c", &size, &batch, &extra);
    const bool only_size = item.find(':') == std::string::npos &&
                           std::sscanf(item.c_str(), "%lld%c", &size, &extra) == 1;
    if (!(only_size || n == 2) || size < 1 || size > 1 << 20 || (n == 2 && batch < 1)) {
      return Status(ErrorKind::kInvalidArgument,
                    "bad schedule entry '" + item + "' (expected SIZE or SIZE:GLOBAL_BATCH)");
    }
    e.world_size = static_cast<int>(size);
    e.global_batch = only_size ? 0 : batch;
    out.push_back(e);
    if (arrow == std::string_view::npos) break;
    pos = arrow + 2;
  }
  return out;
}

Result<SessionOptions> SessionOptions::FromConfig(const Config& config) {
  SessionOptions o;
  auto boolean = [&](std::string_view name, bool* out) -> Status {
    auto r = config.GetBool(name);
    if (!r.ok()) return r.status();
    *out = r.value();
    return Status::Ok();
  };
  auto number = [&](std::string_view name, double* out) -> Status {
    auto r = config.GetDouble(name);
    if (!r.ok()) return r.status();
    *out = r.value();
    return Status::Ok();
  };
  auto optional_u64 = [&](std::string_view name, std::optional<std::uint64_t>* out) -> Status {
    if (config.Get(name).empty()) return Status::Ok();
    auto r = config.GetInt(name);
    if (!r.ok()) return r.status();
    if (r.value() < 1) return Status(ErrorKind::kConfig, std::string(name) + " must be >= 1");
    *out = static_cast<std::uint64_t>(r.value());
    return Status::Ok();
  };
  for (Status s : {boolean("standalone", &o.standalone), boolean("join", &o.join),
                   boolean("bind", &o.bind), boolean("hierarchical", &o.hierarchical_allreduce), number("spawn_timeout_s", &o.spawn_timeout_s),
                   number("connect_timeout_s", &o.connect_timeout_s),
                   number("collective_timeout_s", &o.collective_timeout_s),
                   number("nccl_timeout_s", &o.nccl_timeout_s),
                   number("stall_timeout_s", &o.stall_timeout_s),
                   number("grow_phase_timeout_s", &o.grow_phase_timeout_s),
                   number("checkpoint_interval_s", &o.checkpoint_interval_s),
                   number("total_samples", &o.total_samples),
                   number("respawn_delay_s", &o.respawn_delay_s),
                   number("poll_interval_s", &o.poll_interval_s),
                   number("grad_noise_ema", &o.grad_noise_smoothing),
                   optional_u64("batch_min", &o.batch_min), optional_u64("batch_max", &o.batch_max)}) {
    if (!s.ok()) return s;
  }
  const std::string mode = config.Get("mode");
  if (mode != "elastic" && mode != "rigid") {
    return Status(ErrorKind::kConfig, "ELASTIC_MODE='" + mode + "' is not elastic or rigid");
  }
  o.rigid = mode == "rigid";
  o.job_id = config.Get("job_id");
  auto group = config.GetInt("group_id");
  if (!group.ok()) return group.status();
  if (group.value() < 0 || group.value() > UINT32_MAX) {
    return Status(ErrorKind::kConfig, "ELASTIC_GROUP_ID out of range");
  }
  o.group_id = static_cast<std::uint32_t>(group.value());
  if (!(o.total_samples >= 0) || o.total_samples > 1e18) {
    return Status(ErrorKind::kConfig, "ELASTIC_TOTAL_SAMPLES must be a number of samples >= 0");
  }
  // A count of nodes or node groups, 1-65536.
  auto node_count = [&](std::string_view name, const char* variable, int* out) -> Status {
    auto r = config.GetInt(name);
    if (!r.ok()) return r.status();
    if (r.value() < 1 || r.value() > 65536) {
      return Status(ErrorKind::kConfig, std::string(variable) + " must be between 1 and 65536");
    }
    *out = static_cast<int>(r.value());
    return Status::Ok();
  };
  auto node_group = config.GetInt("node_group");
  if (!node_group.ok()) return node_group.status();
  if (Status s = node_count("node_groups", "ELASTIC_NODE_GROUPS", &o.node_groups); !s.ok()) return s;
  if (Status s = node_count("spanned_nodes", "ELASTIC_SPANNED_NODES", &o.spanned_nodes); !s.ok()) return s;
  if (node_group.value() < 0 || node_group.value() >= o.node_groups) {
    return Status(ErrorKind::kConfig, "ELASTIC_NODE_GROUP=" + std::to_string(node_group.value()) +
                                          " is not below ELASTIC_NODE_GROUPS=" + std::to_string(o.node_groups));
  }
  o.node_group = static_cast<int>(node_group.value());
  o.join_token = config.Get("join_token");
  o.command_dir = config.Get("command_dir");
  o.controller = config.Get("controller");
  o.munge_socket = config.Get("munge_socket");
  if (auto mi = config.GetDouble("metrics_interval_s"); mi.ok()) {
    o.metrics_interval_s = mi.value();
  } else {
    return mi.status();
  }
  o.metrics_file = config.Get("metrics_file");
  o.checkpoint_dir = config.Get("checkpoint_dir");
  o.run_dir = config.Get("run_dir");
  o.relaunch_from = config.Get("relaunch_from");
  o.rendezvous_uri = config.Get("rendezvous_uri");
  o.test_kill_at = config.Get("test_kill_at");
  if (o.rendezvous_uri.rfind("file:", 0) == 0) o.rendezvous_uri = o.rendezvous_uri.substr(5);
  auto rule = ParseLrRule(config.Get("lr_scaling"));
  if (!rule.ok()) return Status(ErrorKind::kConfig, "ELASTIC_LR_SCALING: " + rule.status().message());
  o.lr_rule = rule.value();
  auto backend = ParseBackendKind(config.Get("backend"));
  if (!backend.ok()) return Status(ErrorKind::kConfig, "ELASTIC_BACKEND: " + backend.status().message());
  o.backend = backend.value();
  o.device_numbering = config.Get("slurm_job_id") + "/" + config.Get("cuda_visible_devices");
  auto schedule = ParseSchedule(config.Get("schedule"));
  if (!schedule.ok()) return Status(ErrorKind::kConfig, "ELASTIC_SCHEDULE: " + schedule.status().message());
  o.schedule = schedule.value();
  auto every = config.GetInt("schedule_every");
  if (!every.ok()) return every.status();
  if (every.value() < 1) return Status(ErrorKind::kConfig, "ELASTIC_SCHEDULE_EVERY must be >= 1");
  o.schedule_every = static_cast<std::uint64_t>(every.value());
  if (auto level = ParseLogLevel(config.Get("log_level"))) {
    Logger::Get().SetLevel(*level);
  } else {
    return Status(ErrorKind::kConfig, "ELASTIC_LOG_LEVEL='" + config.Get("log_level") + "' is not a log level");
  }
  if (o.join && !o.standalone && o.join_token.empty()) {
    return Status(ErrorKind::kConfig, "ELASTIC_JOIN=1 needs ELASTIC_JOIN_TOKEN");
  }
  if (o.node_groups > 1 && !o.join && o.join_token.empty()) {
    return Status(ErrorKind::kConfig, "ELASTIC_NODE_GROUPS > 1 needs ELASTIC_JOIN_TOKEN (the job's initial token)");
  }
  return o;
}

Result<SessionOptions> SessionOptions::FromEnvironment() {
  return FromConfig(Config::FromEnvironment());
}

}  // namespace elastic::mpi
