// elasticd: the scheduling-epoch controller of elastic jobs, next to slurmctld.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>

#include "config.h"
#include "controller.h"
#include "db.h"
#include "elastic/common/cli.h"
#include "elastic/common/exit_codes.h"
#include "elastic/common/log.h"
#include "elastic/common/site.h"
#include "elastic/common/version.h"
#include "server.h"
#include "slurm_adapter.h"

namespace {

using namespace elastic;
using namespace elastic::controller;

void Usage(std::FILE* out) {
  std::fprintf(out,
               "Usage: elasticd --config FILE [--foreground]\n"
               "       elasticd --check-config FILE\n"
               "       elasticd --help | --version\n\n"
               "The controller of elastic jobs: at every scheduling epoch it reads the cluster from Slurm, runs\n"
               "the optimizer and grows jobs (extension jobs) or shrinks them. It listens for the plugin, the\n"
               "runtime and elasticctl on controller.listen (munge-authenticated).\n\n"
               "  --config FILE        configuration file (site-config/elasticd.conf documents every key)\n"
               "  --check-config FILE  validate FILE (and that plugstack.conf's controller= matches it), then exit\n"
               "  --foreground         accepted for systemd units; elasticd never daemonizes itself\n\n"
               "Signals: SIGHUP reloads the configuration (a bad file keeps the running one), SIGTERM and\n"
               "SIGINT stop the daemon. Exit codes: 0 ok, 1 failure, 2 usage error.\n\nConfiguration keys:\n");
  for (const auto& [key, help] : ConfigKeys()) std::fprintf(out, "  %-40s %s\n", key.c_str(), help.c_str());
}

int CheckConfig(const std::string& path) {
  auto cfg = LoadConfig(path);
  if (!cfg.ok()) {
    std::fprintf(stderr, "elasticd: %s\n", cfg.status().message().c_str());
    return kExitFailure;
  }
  auto site = config::FindSiteAddress(cfg.value().slurm_conf);
  if (site.ok() && !(site.value().controller == cfg.value().listen)) {
    std::fprintf(stderr, "elasticd: warning: %s says controller=%s but controller.listen is %s\n",
                 site.value().plugstack.c_str(), site.value().controller.ToString().c_str(),
                 cfg.value().listen.ToString().c_str());
  }
  // Checked under the limits elasticd itself will have (systemd runs ExecStartPre with them).
  if (std::string shortfall = DescriptorShortfall(cfg.value().server.max_connections); !shortfall.empty()) {
    std::fprintf(stderr, "elasticd: warning: %s\n", shortfall.c_str());
  }
  std::printf("%s: configuration is valid\n", path.c_str());
  return kExitOk;
}

void ApplyLogging(const ControllerConfig& c) {
  std::vector<std::shared_ptr<LogSink>> sinks;
  if (c.log_file.empty()) {
    sinks.push_back(std::make_shared<StderrSink>("elasticd"));
  } else {
    sinks.push_back(std::make_shared<FileSink>(c.log_file));
  }
  Logger::Get().SetSinks(sinks);
  Logger::Get().SetLevel(*ParseLogLevel(c.log_level));
}

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

bool TrustedOwner(uid_t owner) { return owner == 0 || owner == ::geteuid(); }

Status CheckNotWritableByOthers(const std::string& path, const char* what, bool must_exist) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (!must_exist && errno == ENOENT) return Status::Ok();
    return Status(ErrorKind::kConfig, std::string("cannot use ") + what + " " + path + ": " + std::strerror(errno));
  }
  if (!TrustedOwner(st.st_uid)) {
    return Status(ErrorKind::kPermission, std::string(what) + " " + path + " belongs to uid " +
                                              std::to_string(st.st_uid) + ", not to root or elasticd's user");
  }
  // No exception for sticky directories (/tmp): others could create the database's -wal/-shm
  // or the log file there before elasticd does.
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return Status(ErrorKind::kPermission, std::string(what) + " " + path + " is writable by group or others (mode " +
                                              ModeText(st.st_mode) + "): chmod go-w " + path);
  }
  return Status::Ok();
}

Status CheckLogPermissions(const ControllerConfig& c) {
  if (c.log_file.empty()) return Status::Ok();
  Status s = CheckNotWritableByOthers(c.log_file, "log file", false);
  if (!s.ok()) return s;
  return CheckNotWritableByOthers(std::filesystem::path(c.log_file).parent_path().string(), "log directory", true);
}

// What elasticd trusts at start: its configuration decides which program extension jobs run
// and where state and logs go; its state database holds join tokens. None of it may be changed
// by anyone but root or elasticd's own user, and the database may be read by nobody else.
// Returns the first problem, naming the path, its mode and owner, and the fix. (Not checked:
// the directories above these; a site keeps them root's, as for slurm.conf.)
Status CheckStartupPermissions(const std::string& config_path, const ControllerConfig& c) {
  Status s = CheckNotWritableByOthers(config_path, "configuration file", true);
  if (!s.ok()) return s;
  // The state directory is created (mode 0700) when missing.
  const std::filesystem::path db(c.state_db);
  std::error_code ec;
  if (!std::filesystem::exists(db.parent_path(), ec)) {
    std::filesystem::create_directories(db.parent_path(), ec);
    if (ec) return Status(ErrorKind::kConfig, "cannot create state directory " + db.parent_path().string() + ": " + ec.message());
    ::chmod(db.parent_path().c_str(), 0700);
  }
  s = CheckNotWritableByOthers(db.parent_path().string(), "state directory", true);
  if (!s.ok()) return s;
  for (const std::string& path : {c.state_db, c.state_db + "-wal", c.state_db + "-shm"}) {
    s = CheckNotWritableByOthers(path, "state database", false);
    if (!s.ok()) return s;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO))) {
      return Status(ErrorKind::kPermission, "state database " + path + " (join tokens) is readable by group or others (mode " +
                                                ModeText(st.st_mode) + "): chmod 600 " + path);
    }
  }
  s = CheckLogPermissions(c);
  if (!s.ok()) return s;
  if (!c.munge_socket.empty()) {
    struct stat st {};
    if (::stat(c.munge_socket.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      return Status(ErrorKind::kConfig, "controller.munge_socket " + c.munge_socket + " is not a socket");
    }
  }
  ::umask(077);  // everything elasticd creates (database, WAL, log) is its own
  return Status::Ok();
}

int Run(const std::string& path) {
  auto cfg = LoadConfig(path);
  if (!cfg.ok()) {
    std::fprintf(stderr, "elasticd: %s\n", cfg.status().message().c_str());
    return kExitFailure;
  }
  // Checked before the log file is opened: a refusal goes to standard error.
  Status s = CheckStartupPermissions(path, cfg.value());
  if (!s.ok()) {
    std::fprintf(stderr, "elasticd: refusing to start: %s\n", s.message().c_str());
    return kExitFailure;
  }
  try {
    ApplyLogging(cfg.value());
  } catch (const Error& e) {
    std::fprintf(stderr, "elasticd: %s\n", e.what());
    return kExitFailure;
  }
  auto db = Database::Open(cfg.value().state_db);
  if (!db.ok()) {
    Log(LogLevel::kError, "", db.status().message());
    return kExitFailure;
  }
  auto slurm = std::make_unique<SlurmAdapter>(cfg.value().slurm_conf);
  Controller ctl(cfg.value(), std::move(db).value(), std::move(slurm));
  ctl.Reconcile();

  boost::asio::io_context io;
  Server server(
      io, cfg.value().munge_socket, [&](uid_t uid, const nlohmann::json& msg) { return ctl.Handle(uid, msg); },
      cfg.value().server);
  s = server.Listen(cfg.value().listen);
  if (!s.ok()) {
    Log(LogLevel::kError, "", s.message());
    return kExitFailure;
  }
  Log(LogLevel::kInfo, "", "elasticd ", ELASTIC_VERSION_STRING, " listening on ", cfg.value().listen.ToString(),
      ", epoch ", ctl.config().epoch_s, " s, policy ", ctl.config().policy);

  // One timer: it looks at Slurm's job table on its interval and runs an epoch when one is due
  // (the period passed, or an event waits: epoch_trigger.h).
  boost::asio::steady_timer epoch(io);
  std::function<void(double)> schedule = [&](double delay_s) {
    epoch.expires_after(std::chrono::milliseconds(std::max<int64_t>(10, static_cast<int64_t>(delay_s * 1000))));
    epoch.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      try {
        ctl.Watch();
        std::string why;
        if (ctl.EpochDue(&why)) ctl.RunEpoch(false, why);
      } catch (const std::exception& e) {
        Log(LogLevel::kError, "epoch", "epoch failed: ", e.what());
      }
      schedule(ctl.SecondsUntilNextCheck());
    });
  };
  schedule(1.0);

  boost::asio::signal_set signals(io, SIGTERM, SIGINT, SIGHUP);
  std::function<void()> wait_signal = [&] {
    signals.async_wait([&](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGHUP) {
        auto fresh = LoadConfig(path);
        if (!fresh.ok()) {
          Log(LogLevel::kError, "", "reload refused, keeping the running configuration: ", fresh.status().message());
        } else if (!(fresh.value().listen == ctl.config().listen) || fresh.value().state_db != ctl.config().state_db) {
          Log(LogLevel::kError, "", "reload refused: controller.listen and controller.state_db need a restart");
        } else if (Status perms = CheckLogPermissions(fresh.value()); !perms.ok()) {
          Log(LogLevel::kError, "", "reload refused, keeping the running configuration: ", perms.message());
        } else {
          try {
            ApplyLogging(fresh.value());
            ctl.SetConfig(fresh.value());
            server.SetLimits(fresh.value().server);
            Log(LogLevel::kInfo, "", "configuration reloaded from ", path);
          } catch (const Error& e) {
            Log(LogLevel::kError, "", "reload refused, keeping the running configuration: ", e.what());
          }
        }
        wait_signal();
        return;
      }
      Log(LogLevel::kInfo, "", "stopping on signal ", sig);
      server.Stop();
      epoch.cancel();
      io.stop();
    });
  };
  wait_signal();
  io.run();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // The client libraries elasticd calls (Slurm's, munge's) write to slurmctld's and munged's
  // sockets: one that its daemon closed under it must fail that call (EPIPE), not kill elasticd
  // without a word (SIGPIPE). elasticd starts no programs that would inherit this.
  std::signal(SIGPIPE, SIG_IGN);
  std::string config;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (std::optional<int> done = cli::HelpOrVersion(a, "elasticd", Usage)) return *done;
    if (a == "--check-config" && i + 1 < argc) return CheckConfig(argv[++i]);
    if (a == "--config" && i + 1 < argc) {
      config = argv[++i];
      continue;
    }
    if (a == "--foreground" || a == "-D") continue;
    std::fprintf(stderr, "elasticd: unknown or incomplete argument '%s' (see --help)\n", a.c_str());
    return kExitUsage;
  }
  if (config.empty()) {
    std::fprintf(stderr, "elasticd: --config FILE is required (see --help)\n");
    return kExitUsage;
  }
  return Run(config);
}
