#include "config.h"

#include <charconv>

#include "elastic/common/ini.h"
#include "elastic/common/log.h"
#include "elastic/optimizer/policy.h"

namespace elastic::controller {
namespace {

Status Bad(const std::string& m) { return Status(ErrorKind::kInvalidArgument, m); }

template <typename R, typename F>
Status Apply(R result, F assign) {
  if (!result.ok()) return result.status();
  assign(std::move(result).value());
  return Status::Ok();
}

Status Seconds(std::string_view v, const char* what, double min, double max, double& out) {
  auto n = config::ParseInt(v, static_cast<int64_t>(min), static_cast<int64_t>(max), what);
  if (!n.ok()) return n.status();
  out = static_cast<double>(n.value());
  return Status::Ok();
}

std::vector<config::KeySpec> Table(ControllerConfig& c) {
  using config::KeySpec;
  return {
      {"slurm.conf", "path of slurm.conf (default: Slurm's own, or $SLURM_CONF)",
       [&](std::string_view v) -> Status {
         if (v.front() != '/') return Bad("slurm.conf: '" + std::string(v) + "' is not an absolute path");
         c.slurm_conf = v;
         return Status::Ok();
       }},
      {"controller.listen", "HOST:PORT to listen on; must equal the plugin's controller= in plugstack.conf",
       [&](std::string_view v) {
         return Apply(config::ParseHostPort(v, "controller.listen"), [&](config::HostPort h) { c.listen = h; });
       }},
      {"controller.munge_socket", "munged's socket (default: munge's own)",
       [&](std::string_view v) -> Status {
         if (v.front() != '/') return Bad("controller.munge_socket: '" + std::string(v) + "' is not an absolute path");
         c.munge_socket = v;
         return Status::Ok();
       }},
      {"controller.state_db", "SQLite database of elasticd's state (default /var/lib/elasticd/state.db)",
       [&](std::string_view v) -> Status {
         if (v.front() != '/') return Bad("controller.state_db: '" + std::string(v) + "' is not an absolute path");
         c.state_db = v;
         return Status::Ok();
       }},
      {"controller.log_level", "error, warning, info, verbose or debug",
       [&](std::string_view v) -> Status {
         if (!ParseLogLevel(v)) return Bad("controller.log_level: '" + std::string(v) + "' is not one of error, warning, info, verbose, debug");
         c.log_level = v;
         return Status::Ok();
       }},
      {"controller.log_file", "log file (default: standard error)",
       [&](std::string_view v) -> Status {
         if (v.front() != '/') return Bad("controller.log_file: '" + std::string(v) + "' is not an absolute path");
         c.log_file = v;
         return Status::Ok();
       }},
      {"controller.admin_cache",
       "seconds a user's role (AdminLevel from slurmdbd, SlurmUser) is reused, 0-3600 (default 60; 0: ask every time)",
       [&](std::string_view v) { return Seconds(v, "controller.admin_cache", 0, 3600, c.admin_cache_s); }},
      {"controller.max_connections",
       "connections elasticd keeps open at once, 1-1000000 (default 4096; at most what the open-file limit allows)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 1, 1000000, "controller.max_connections"),
                      [&](int64_t n) { c.server.max_connections = n; });
       }},
      {"controller.max_connections_per_user",
       "connections one uid may hold open, root excepted, 1-1000000 (default 1024; each running job's runtime holds one)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 1, 1000000, "controller.max_connections_per_user"),
                      [&](int64_t n) { c.server.max_connections_per_user = n; });
       }},
      {"controller.max_unauthenticated_per_address",
       "connections from one address that have not sent their first message yet, 1-1000000 (default 256)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 1, 1000000, "controller.max_unauthenticated_per_address"),
                      [&](int64_t n) { c.server.max_unauthenticated_per_address = n; });
       }},
      {"controller.max_unauthenticated_mib",
       "MiB of requests elasticd reads at once before munge has authenticated them, 1-4096 (default 16)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 1, 4096, "controller.max_unauthenticated_mib"),
                      [&](int64_t n) { c.server.max_unauthenticated_bytes = n << 20; });
       }},
      {"controller.frame_timeout",
       "seconds a client may take to send the rest of a started frame, and a new connection its first "
       "message, 1-299 (default 10)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 1, 299, "controller.frame_timeout"),
                      [&](int64_t n) { c.server.frame_timeout = std::chrono::seconds(n); });
       }},
      {"scheduler.epoch", "seconds between scheduling epochs, 1-3600 (default 60)",
       [&](std::string_view v) { return Seconds(v, "scheduler.epoch", 1, 3600, c.epoch_s); }},
      {"scheduler.event_epochs",
       "yes: an epoch also runs soon after a job is submitted, starts or ends, or a rescale finishes (default yes)",
       [&](std::string_view v) {
         return Apply(config::ParseBool(v, "scheduler.event_epochs"), [&](bool b) { c.event_epochs = b; });
       }},
      {"scheduler.event_min_gap", "seconds, 1-3600: at most one event epoch per this time (default 2)",
       [&](std::string_view v) { return Seconds(v, "scheduler.event_min_gap", 1, 3600, c.event_min_gap_s); }},
      {"scheduler.watch_interval",
       "seconds, 1-3600, between two looks at Slurm's job table for submissions, starts and ends (default 2)",
       [&](std::string_view v) { return Seconds(v, "scheduler.watch_interval", 1, 3600, c.watch_interval_s); }},
      {"extensions.release_hold",
       "seconds, 0-3600: GPUs released while a job waits for their type are kept from growth this long, or until "
       "no job waits for the type (default 120; 0: off)",
       [&](std::string_view v) { return Seconds(v, "extensions.release_hold", 0, 3600, c.release_hold_s); }},
      {"scheduler.policy", "optimizer policy: " + optimizer::PolicyNameList(),
       [&](std::string_view v) {
         return Apply(config::ParseChoice(v, optimizer::PolicyNames(), "scheduler.policy"),
                      [&](std::string s) { c.policy = s; });
       }},
      {"scheduler.objective", "sum (weighted goodput) or power-mean (fairness)",
       [&](std::string_view v) {
         return Apply(config::ParseChoice(v, {"sum", "power-mean"}, "scheduler.objective"),
                      [&](std::string s) { c.objective = s; });
       }},
      {"scheduler.power_mean_exponent_percent",
       "with objective = power-mean, its exponent p = -N/100, N 1-1000 (default 100: Pollux's p = -1; 50: Sia's "
       "p = -0.5)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 1, 1000, "scheduler.power_mean_exponent_percent"),
                      [&](int64_t n) { c.power_mean_p = -static_cast<double>(n) / 100.0; });
       }},
      {"scheduler.min_rescale_interval", "seconds between two rescales of one job (default 120)",
       [&](std::string_view v) {
         return Seconds(v, "scheduler.min_rescale_interval", 0, 86400, c.min_rescale_interval_s);
       }},
      {"scheduler.min_gain_percent", "relative utility gain in percent a rescale must promise (default 5)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 0, 1000, "scheduler.min_gain_percent"),
                      [&](int64_t n) { c.min_gain = static_cast<double>(n) / 100.0; });
       }},
      {"scheduler.rescale_cost", "seconds a rescale is assumed to cost in the optimizer's penalty (default 30)",
       [&](std::string_view v) { return Seconds(v, "scheduler.rescale_cost", 0, 3600, c.rescale_cost_s); }},
      {"scheduler.pending_weight",
       "weight of a job waiting for GPUs against the gains of extensions, 0-1000000 (default 100)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 0, 1000000, "scheduler.pending_weight"),
                      [&](int64_t n) { c.pending_weight = static_cast<double>(n); });
       }},
      {"scheduler.srpt_exponent_percent",
       "remaining-time weights for jobs that report their total samples: (1 / hours left)^(N/100), 0-400 "
       "(default 0: off; 50 is what docs/results.md measured best, 100 is Smith's rule)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 0, 400, "scheduler.srpt_exponent_percent"),
                      [&](int64_t n) { c.srpt_exponent = static_cast<double>(n) / 100.0; });
       }},
      {"scheduler.rescale_payback",
       "for jobs that report their total samples, a rescale must shorten the remaining run by this many times "
       "rescale_cost, on top of the age-based penalty, 0-100 (default 0: the age-based penalty alone)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 0, 100, "scheduler.rescale_payback"),
                      [&](int64_t n) { c.rescale_payback = static_cast<double>(n); });
       }},
      {"scheduler.solve_budget_ms",
       "milliseconds the optimizer may take per epoch; larger problems get a plan with a certified gap (default 300)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 1, 600000, "scheduler.solve_budget_ms"),
                      [&](int64_t n) { c.solve_budget_ms = static_cast<double>(n); });
       }},
      {"scheduler.fit_budget_ms",
       "milliseconds per epoch for fitting jobs' step-time models, 1-600000 (default 200); jobs measured at a new "
       "size first, the others keep their last fit until a later epoch",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 1, 600000, "scheduler.fit_budget_ms"),
                      [&](int64_t n) { c.fit_budget_ms = static_cast<double>(n); });
       }},
      {"scheduler.paused", "1: start with every elastic action paused (default 0)",
       [&](std::string_view v) {
         return Apply(config::ParseBool(v, "scheduler.paused"), [&](bool b) { c.paused = b; });
       }},
      {"extensions.partition", "partition of extension jobs (default: the parent's)",
       [&](std::string_view v) -> Status {
         c.extension_partition = v;
         return Status::Ok();
       }},
      {"extensions.qos", "QOS of extension jobs, preemptible by normal work (default: the user's default)",
       [&](std::string_view v) -> Status {
         c.extension_qos = v;
         return Status::Ok();
       }},
      {"extensions.max_time", "longest time limit of an extension job, minutes (default 1440)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 1, 525600, "extensions.max_time"),
                      [&](int64_t n) { c.extension_max_time_min = n; });
       }},
      {"extensions.launcher", "absolute path of elastic-launch on the compute nodes",
       [&](std::string_view v) -> Status {
         if (v.front() != '/') return Bad("extensions.launcher: '" + std::string(v) + "' is not an absolute path");
         c.launcher = v;
         return Status::Ok();
       }},
      {"extensions.ready_timeout", "seconds an extension may take to be ready, and then to join, before it is cancelled (default 300)",
       [&](std::string_view v) { return Seconds(v, "extensions.ready_timeout", 10, 86400, c.ready_timeout_s); }},
      {"extensions.relaunch_gather",
       "seconds a group joining by relaunch waits at most for the job's other groups submitted with it, so "
       "that they join in one relaunch, 0-300, 0: never waits (default 10)",
       [&](std::string_view v) { return Seconds(v, "extensions.relaunch_gather", 0, 300, c.relaunch_gather_s); }},
      {"extensions.leave_timeout",
       "seconds a job may take to let an extension leave (from the shrink command to its ack) before the "
       "extension job is cancelled, 0-86400, 0: never (default 300)",
       [&](std::string_view v) { return Seconds(v, "extensions.leave_timeout", 0, 86400, c.leave_timeout_s); }},
      {"extensions.min_time_left",
       "seconds of training a job must have left (its remaining samples at its current speed) to be grown, "
       "0-86400 (default: two epochs)",
       [&](std::string_view v) { return Seconds(v, "extensions.min_time_left", 0, 86400, c.min_time_left_s); }},
      {"recovery.restart_world_lost",
       "1: requeue a job whose batch script exits 75 (a rank of its world died; it resumes from its "
       "last checkpoint), 0: leave it failed (default 1)",
       [&](std::string_view v) {
         return Apply(config::ParseBool(v, "recovery.restart_world_lost"), [&](bool b) { c.restart_world_lost = b; });
       }},
      {"recovery.max_restarts", "restarts of one job after which it is left failed, 0-100 (default 3)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 0, 100, "recovery.max_restarts"),
                      [&](int64_t n) { c.max_restarts = static_cast<int>(n); });
       }},
      {"types.moves",
       "1: move a job that accepts several GPU types (--elastic-gpu-types) to another of them when the move "
       "pays back, 0: never (default 1)",
       [&](std::string_view v) { return Apply(config::ParseBool(v, "types.moves"), [&](bool b) { c.type_moves = b; }); }},
      {"types.speed",
       "relative speed per GPU of each GPU type, TYPE:FACTOR[,TYPE:FACTOR...] (e.g. a100:2,v100:1; a type not "
       "named counts 1): a job's speed on a type it has not run on, from its speed where it ran",
       [&](std::string_view v) -> Status {
         auto items = config::ParseList(v, "types.speed");
         if (!items.ok()) return items.status();
         for (const auto& item : items.value()) {
           auto colon = item.find(':');
           if (colon == std::string::npos || colon == 0) return Bad("types.speed: '" + item + "' is not TYPE:FACTOR");
           const std::string factor = item.substr(colon + 1);
           double f = 0;
           auto [ptr, ec] = std::from_chars(factor.data(), factor.data() + factor.size(), f);
           if (factor.empty() || ec != std::errc() || ptr != factor.data() + factor.size() || !(f >= 0.01 && f <= 1000)) {
             return Bad("types.speed: factor '" + factor + "' of " + item.substr(0, colon) +
                        " is not a number between 0.01 and 1000");
           }
           c.type_speed[item.substr(0, colon)] = f;
         }
         return Status::Ok();
       }},
      {"types.move_cost",
       "seconds a move to another GPU type costs the job (checkpoint, requeue, restart) until elasticd has "
       "measured one, 0-86400 (default 120)",
       [&](std::string_view v) { return Seconds(v, "types.move_cost", 0, 86400, c.move_cost_s); }},
      {"types.move_payback",
       "a move must save this many times its cost of the job's remaining training, 1-100 (default 2)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 1, 100, "types.move_payback"),
                      [&](int64_t n) { c.move_payback = static_cast<double>(n); });
       }},
      {"limits.default_account_extension_gpus", "GPUs an account may hold through extensions (default: no limit)",
       [&](std::string_view v) {
         return Apply(config::ParseInt(v, 0, 1000000, "limits.default_account_extension_gpus"),
                      [&](int64_t n) { c.default_account_extension_gpus = n; });
       }},
      {"limits.account_extension_gpus", "per-account caps, ACCOUNT:GPUS[,ACCOUNT:GPUS...]",
       [&](std::string_view v) -> Status {
         auto items = config::ParseList(v, "limits.account_extension_gpus");
         if (!items.ok()) return items.status();
         for (const auto& item : items.value()) {
           auto colon = item.find(':');
           if (colon == std::string::npos || colon == 0) {
             return Bad("limits.account_extension_gpus: '" + item + "' is not ACCOUNT:GPUS");
           }
           auto n = config::ParseInt(std::string_view(item).substr(colon + 1), 0, 1000000,
                                     "limits.account_extension_gpus " + item.substr(0, colon));
           if (!n.ok()) return n.status();
           c.account_extension_gpus[item.substr(0, colon)] = n.value();
         }
         return Status::Ok();
       }},
  };
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ConfigKeys() {
  ControllerConfig scratch;
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& k : Table(scratch)) keys.emplace_back(k.key, k.help);
  return keys;
}

Result<ControllerConfig> LoadConfig(const std::string& path) {
  ControllerConfig c;
  Status s = config::LoadIniFile(path, Table(c));
  if (!s.ok()) return s;
  return c;
}

}  // namespace elastic::controller
