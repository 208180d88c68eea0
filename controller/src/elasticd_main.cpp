// elasticd: the scheduling-epoch controller of elastic jobs, next to slurmctld.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>

#include "config.h"
#include "controller.h"
#include "db.h"
#include "elastic/common/log.h"
#include "elastic/common/site.h"
#include "elastic/common/version.h"
#include "server.h"
#include "slurm_adapter.h"

namespace {

using namespace elastic;
using namespace elastic::controller;

enum ExitCode { kOk = 0, kFailure = 1, kUsage = 2 };

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
    return kFailure;
  }
  auto site = config::FindSiteAddress(cfg.value().slurm_conf);
  if (site.ok() && !(site.value().controller == cfg.value().listen)) {
    std::fprintf(stderr, "elasticd: warning: %s says controller=%s but controller.listen is %s\n",
                 site.value().plugstack.c_str(), site.value().controller.ToString().c_str(),
                 cfg.value().listen.ToString().c_str());
  }
  std::printf("%s: configuration is valid\n", path.c_str());
  return kOk;
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

// The state database holds join tokens: its directory must not be writable by others and the
// file must be readable by its owner only.
Status PrepareStatePath(const std::string& db) {
  std::filesystem::path dir = std::filesystem::path(db).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Status(ErrorKind::kConfig, "cannot use state directory " + dir.string());
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return Status(ErrorKind::kConfig, "state directory " + dir.string() + " is writable by group or others");
  }
  ::umask(077);
  return Status::Ok();
}

int Run(const std::string& path) {
  auto cfg = LoadConfig(path);
  if (!cfg.ok()) {
    std::fprintf(stderr, "elasticd: %s\n", cfg.status().message().c_str());
    return kFailure;
  }
  try {
    ApplyLogging(cfg.value());
  } catch (const Error& e) {
    std::fprintf(stderr, "elasticd: %s\n", e.what());
    return kFailure;
  }
  Status s = PrepareStatePath(cfg.value().state_db);
  if (!s.ok()) {
    Log(LogLevel::kError, "", s.message());
    return kFailure;
  }
  auto db = Database::Open(cfg.value().state_db);
  if (!db.ok()) {
    Log(LogLevel::kError, "", db.status().message());
    return kFailure;
  }
  auto slurm = std::make_unique<SlurmAdapter>(cfg.value().slurm_conf);
  Controller ctl(cfg.value(), std::move(db).value(), std::move(slurm));
  ctl.Reconcile();

  boost::asio::io_context io;
  Server server(io, cfg.value().munge_socket, [&](uid_t uid, const nlohmann::json& msg) { return ctl.Handle(uid, msg); });
  s = server.Listen(cfg.value().listen);
  if (!s.ok()) {
    Log(LogLevel::kError, "", s.message());
    return kFailure;
  }
  Log(LogLevel::kInfo, "", "elasticd ", ELASTIC_VERSION_STRING, " listening on ", cfg.value().listen.ToString(),
      ", epoch ", ctl.config().epoch_s, " s, policy ", ctl.config().policy);

  boost::asio::steady_timer epoch(io);
  std::function<void(std::chrono::milliseconds)> schedule = [&](std::chrono::milliseconds delay) {
    epoch.expires_after(delay);
    epoch.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      try {
        ctl.RunEpoch();
      } catch (const std::exception& e) {
        Log(LogLevel::kError, "epoch", "epoch failed: ", e.what());
      }
      schedule(std::chrono::milliseconds(static_cast<int64_t>(ctl.config().epoch_s * 1000)));
    });
  };
  schedule(std::chrono::milliseconds(1000));

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
        } else {
          try {
            ApplyLogging(fresh.value());
            ctl.SetConfig(fresh.value());
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
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      Usage(stdout);
      return kOk;
    }
    if (a == "-V" || a == "--version") {
      std::printf("elasticd %s\n", ELASTIC_VERSION_STRING);
      return kOk;
    }
    if (a == "--check-config" && i + 1 < argc) return CheckConfig(argv[++i]);
    if (a == "--config" && i + 1 < argc) {
      config = argv[++i];
      continue;
    }
    if (a == "--foreground" || a == "-D") continue;
    std::fprintf(stderr, "elasticd: unknown or incomplete argument '%s' (see --help)\n", a.c_str());
    return kUsage;
  }
  if (config.empty()) {
    std::fprintf(stderr, "elasticd: --config FILE is required (see --help)\n");
    return kUsage;
  }
  return Run(config);
}
