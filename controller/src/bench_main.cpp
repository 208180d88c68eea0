// elasticd-bench: the controller's epoch stages (snapshot -> plan -> diff) on recorded or
// generated views of a cluster, without Slurm. Prints one JSON line per run; replay exits 1 when the
// stages miss their target (under 1 s; ELASTIC_BENCH_TIGHTEN tightens it, common/bench_target.h).
//
//   elasticd-bench generate [--nodes N] [--gpus-per-node G] [--types T] [--jobs J] [--pending P] [--seed S]
//   elasticd-bench replay --snapshot FILE [--repeat N] [--policy NAME]
//   elasticd-bench metrics --jobs ID[,ID...] --rate R --seconds S [--connections C]
//                          [--controller HOST:PORT] [--munge-socket PATH]
//   elasticctl snapshot > FILE     (records one from a running elasticd)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "controller.h"
#include "db.h"
#include "elastic/common/bench_target.h"
#include "elastic/common/exit_codes.h"
#include "elastic/common/log.h"
#include "elastic/common/site.h"
#include "elastic/common/wire.h"
#include "snapshot.h"

namespace {

using namespace elastic;
using namespace elastic::controller;

// The controller's stages at 10,000 elastic jobs: under 1 s (docs/results.md, "Benchmark targets").
constexpr double kStagesTargetMs = 1000;

void Usage(std::FILE* out) {
  std::fprintf(out,
               "Usage: elasticd-bench generate [--nodes N] [--gpus-per-node G] [--types T] [--jobs J] [--pending P]\n"
               "                               [--seed S]\n"
               "       elasticd-bench replay --snapshot FILE [--repeat N] [--policy NAME]\n"
               "       elasticd-bench metrics --jobs ID[,ID...] --rate R --seconds S [--connections C]\n"
               "                              [--controller HOST:PORT] [--munge-socket PATH]\n\n"
               "generate: prints a synthetic recorded snapshot (JSON) of a cluster with running elastic jobs.\n"
               "replay:   runs elasticd's epoch stages (dry run: snapshot, room, plan, diff) on a recorded snapshot\n"
               "          (from `elasticctl snapshot` or `generate`) and prints one JSON line with the median\n"
               "          time of each stage in ms. Defaults: 2500 nodes x 8 GPUs, 3 types, 10000 jobs, 200\n"
               "          pending, seed 1; 5 repeats, policy dp. Target: every repeat's stages under 1000 ms\n"
               "          (total_ms_max); exit status 1 and a line naming it when missed.\n"
               "          ELASTIC_BENCH_TIGHTEN=F (>= 1) divides the target by F (to test the miss path).\n"
               "metrics:  a load generator: sends metrics messages for the given jobs (round robin) to a running\n"
               "          elasticd at R messages per second for S seconds over C connections (default 4), as\n"
               "          the calling user (the jobs' owner), and prints one JSON line: messages sent, accepted,\n"
               "          refused and failed, per job, the achieved rate and reply latencies. Controller: from\n"
               "          plugstack.conf (via slurm.conf) unless given.\n");
}

int Generate(const std::map<std::string, std::string>& o) {
  auto get = [&](const char* k, int d) { return o.count(k) ? std::atoi(o.at(k).c_str()) : d; };
  RecordedSnapshot s = GenerateSnapshot(get("--nodes", 2500), get("--gpus-per-node", 8), get("--types", 3),
                                        get("--jobs", 10000), get("--pending", 200),
                                        static_cast<uint64_t>(get("--seed", 1)));
  std::cout << SnapshotToJson(s.nodes, s.jobs, s.registry).dump() << "\n";
  return kExitOk;
}

int Replay(const std::map<std::string, std::string>& o) {
  if (!o.count("--snapshot")) {
    std::fprintf(stderr, "elasticd-bench: replay needs --snapshot FILE\n");
    return kExitUsage;
  }
  const Result<double> tighten = bench::TightenFactor();
  if (!tighten.ok()) {
    std::fprintf(stderr, "elasticd-bench: %s\n", tighten.status().message().c_str());
    return kExitUsage;
  }
  const double factor = tighten.value();
  std::ifstream in(o.at("--snapshot"));
  if (!in) {
    std::fprintf(stderr, "elasticd-bench: cannot read %s\n", o.at("--snapshot").c_str());
    return kExitFailure;
  }
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) {
    std::fprintf(stderr, "elasticd-bench: %s is not JSON\n", o.at("--snapshot").c_str());
    return kExitFailure;
  }
  if (j.contains("snapshot")) j = j["snapshot"];  // elasticctl's reply as it prints it
  auto snap = SnapshotFromJson(j);
  if (!snap.ok()) {
    std::fprintf(stderr, "elasticd-bench: %s\n", snap.status().message().c_str());
    return kExitFailure;
  }
  auto db = Database::Open(":memory:");
  if (!db.ok()) {
    std::fprintf(stderr, "elasticd-bench: %s\n", db.status().message().c_str());
    return kExitFailure;
  }
  SeedRegistry(*db.value(), snap.value().registry);
  ControllerConfig cfg;
  cfg.min_rescale_interval_s = 0;
  if (o.count("--policy")) cfg.policy = o.at("--policy");
  Logger::Get().SetLevel(LogLevel::kWarning);
  Controller ctl(cfg, std::move(db).value(), nullptr);
  int repeat = o.count("--repeat") ? std::max(1, std::atoi(o.at("--repeat").c_str())) : 5;
  std::map<std::string, std::vector<double>> stages;
  std::vector<double> totals;
  nlohmann::json last;
  // In the first epoch every job measured at two sizes is due for its first fit (as after a restart
  // of elasticd): it fits what scheduler.fit_budget_ms allows, the rest in later epochs.
  nlohmann::json first_stages = nlohmann::json::object();
  nlohmann::json fits_each = nlohmann::json::array();
  for (int i = 0; i < repeat; ++i) {
    EpochResult r = ctl.Epoch(snap.value().nodes, snap.value().jobs, /*dry_run=*/true);
    if (i == 0) {
      for (const auto& [k, v] : r.stage_ms) first_stages[k] = v;
    }
    fits_each.push_back(r.plan.value("fits", nlohmann::json::object()));
    for (const auto& [k, v] : r.stage_ms) stages[k].push_back(v);
    totals.push_back(r.duration_ms);
    last = r.plan;
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  int grows = 0, shrinks = 0;
  for (const auto& d : last.value("decisions", nlohmann::json::array())) {
    grows += d.value("action", "") == "grow";
    shrinks += d.value("action", "") == "shrink";
  }
  const double slowest = *std::max_element(totals.begin(), totals.end());
  nlohmann::json out{{"bench", "controller_stages"},
                     {"policy", cfg.policy},
                     {"nodes", snap.value().nodes.size()},
                     {"jobs", snap.value().jobs.size()},
                     {"elastic", snap.value().registry.size()},
                     {"repeat", repeat},
                     {"total_ms", median(totals)},
                     {"total_ms_max", slowest},
                     {"total_ms_each", totals},
                     {"first_stage_ms", first_stages},
                     {"fits_each", fits_each},
                     {"grows", grows},
                     {"shrinks", shrinks},
                     {"target_ms", kStagesTargetMs}};
  for (const auto& [k, v] : stages) out[k + "_ms"] = median(v);
  // The target: every epoch's stages under 1 s: the median repeat and the slowest, the first one
  // included (every measured job's model is due for a fit there, as after a restart of elasticd).
  const std::vector<bench::TargetCheck> checks{
      bench::Check("total_ms", median(totals), bench::Bound::kBelow, kStagesTargetMs, factor),
      bench::Check("total_ms_max", slowest, bench::Bound::kBelow, kStagesTargetMs, factor)};
  bench::AddChecks(out, checks, factor);
  std::cout << out.dump() << std::endl;
  if (const std::string missed = bench::Missed(checks); !missed.empty()) {
    std::fprintf(stderr, "elasticd-bench: missed target: %s (controller stages, %zu elastic jobs)\n", missed.c_str(),
                 snap.value().registry.size());
    return kExitFailure;
  }
  return kExitOk;
}

// The metrics a rank 0 sends every metrics interval (docs/interfaces.md), with plausible values.
nlohmann::json MetricsMessage(uint32_t job, uint64_t n) {
  return {{"type", "metrics"},        {"job", job},          {"gpus", 2},
          {"step_time_s", 0.1 + 0.001 * static_cast<double>(n % 7)},
          {"local_batch", 32},        {"global_batch", 64},  {"grad_sqr", 0.5},
          {"grad_var", 2.0},          {"accum_steps", 0}};
}

int Metrics(const std::map<std::string, std::string>& o) {
  std::vector<uint32_t> jobs;
  if (o.count("--jobs")) {
    auto items = config::ParseList(o.at("--jobs"), "--jobs");
    if (!items.ok()) {
      std::fprintf(stderr, "elasticd-bench: %s\n", items.status().message().c_str());
      return kExitUsage;
    }
    for (const auto& item : items.value()) {
      auto id = config::ParseInt(item, 1, UINT32_MAX, "--jobs");
      if (!id.ok()) {
        std::fprintf(stderr, "elasticd-bench: %s\n", id.status().message().c_str());
        return kExitUsage;
      }
      jobs.push_back(static_cast<uint32_t>(id.value()));
    }
  }
  auto number = [&](const char* key, double fallback, double min, double max) -> double {
    if (!o.count(key)) return fallback;
    char* end = nullptr;
    double v = std::strtod(o.at(key).c_str(), &end);
    if (end == o.at(key).c_str() || *end != '\0' || v < min || v > max) return -1;
    return v;
  };
  const double rate = number("--rate", 0, 0.1, 1e6);
  const double seconds = number("--seconds", 0, 0.1, 86400);
  const double connections_value = number("--connections", 4, 1, 256);
  const int connections = connections_value == std::floor(connections_value) ? static_cast<int>(connections_value) : -1;
  if (jobs.empty() || rate <= 0 || seconds <= 0 || connections <= 0) {
    std::fprintf(stderr, "elasticd-bench: metrics needs --jobs ID[,ID...], --rate R > 0 and --seconds S > 0 "
                         "(--connections 1-256)\n");
    return kExitUsage;
  }
  config::HostPort address;
  if (o.count("--controller")) {
    auto hp = config::ParseHostPort(o.at("--controller"), "--controller");
    if (!hp.ok()) {
      std::fprintf(stderr, "elasticd-bench: %s\n", hp.status().message().c_str());
      return kExitUsage;
    }
    address = hp.value();
  } else {
    auto site = config::FindSiteAddress("");
    if (!site.ok()) {
      std::fprintf(stderr, "elasticd-bench: %s (or give --controller)\n", site.status().message().c_str());
      return kExitFailure;
    }
    address = site.value().controller;
  }
  wire::ClientOptions options;
  if (o.count("--munge-socket")) options.munge_socket = o.at("--munge-socket");

  struct Tally {
    uint64_t sent = 0, ok = 0, refused = 0, failed = 0, connect_failed = 0;
    std::map<uint32_t, uint64_t> accepted;
    std::vector<double> latency_ms;
    std::string first_error;
  };
  std::vector<Tally> tallies(static_cast<size_t>(connections));
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&, c] {
      Tally& t = tallies[static_cast<size_t>(c)];
      auto client = wire::Client::Connect(address, options);
      if (!client.ok()) {
        t.first_error = client.status().message();
        ++t.connect_failed;
        return;
      }
      // Connection c sends messages c, c + C, c + 2C, ... of the global schedule (one every
      // 1/rate seconds), each to job (index mod jobs): every job gets its share at the rate.
      for (uint64_t i = static_cast<uint64_t>(c);; i += static_cast<uint64_t>(connections)) {
        const auto due = start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(static_cast<double>(i) / rate));
        if (due >= stop) break;
        std::this_thread::sleep_until(due);
        const uint32_t job = jobs[i % jobs.size()];
        const auto sent = Clock::now();
        auto reply = client.value()->Call(MetricsMessage(job, i), std::chrono::milliseconds(10000));
        t.latency_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
        ++t.sent;
        if (!reply.ok()) {
          ++t.failed;
          if (t.first_error.empty()) t.first_error = reply.status().message();
          auto again = wire::Client::Connect(address, options);  // a broken connection is replaced
          if (!again.ok()) {
            ++t.connect_failed;
            return;
          }
          client = std::move(again);
          continue;
        }
        Status s = wire::ReplyStatus(reply.value());
        if (s.ok()) {
          ++t.ok;
          ++t.accepted[job];
        } else {
          ++t.refused;
          if (t.first_error.empty()) t.first_error = s.message();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  Tally all;
  for (const Tally& t : tallies) {
    all.sent += t.sent;
    all.ok += t.ok;
    all.refused += t.refused;
    all.failed += t.failed;
    all.connect_failed += t.connect_failed;
    for (const auto& [job, n] : t.accepted) all.accepted[job] += n;
    all.latency_ms.insert(all.latency_ms.end(), t.latency_ms.begin(), t.latency_ms.end());
    if (all.first_error.empty()) all.first_error = t.first_error;
  }
  std::sort(all.latency_ms.begin(), all.latency_ms.end());
  auto pct = [&](double p) {
    return all.latency_ms.empty() ? 0.0 : all.latency_ms[static_cast<size_t>(p * static_cast<double>(all.latency_ms.size() - 1))];
  };
  nlohmann::json per_job = nlohmann::json::object();
  for (const auto& [job, n] : all.accepted) per_job[std::to_string(job)] = n;
  nlohmann::json out{{"bench", "metrics_stream"},   {"jobs", jobs.size()},
                     {"rate_target", rate},         {"rate_achieved", static_cast<double>(all.sent) / elapsed},
                     {"seconds", elapsed},          {"connections", connections},
                     {"sent", all.sent},            {"ok", all.ok},
                     {"refused", all.refused},      {"failed", all.failed},
                     {"connect_failed", all.connect_failed},
                     {"latency_ms_p50", pct(0.5)},  {"latency_ms_p99", pct(0.99)},
                     {"latency_ms_max", pct(1.0)},  {"accepted_per_job", per_job}};
  if (!all.first_error.empty()) out["first_error"] = all.first_error;
  std::cout << out.dump() << "\n";
  return all.sent > 0 && all.ok == all.sent && all.connect_failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    Usage(stderr);
    return kExitUsage;
  }
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help") {
    Usage(stdout);
    return kExitOk;
  }
  std::map<std::string, std::string> opts;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || i + 1 >= argc) {
      std::fprintf(stderr, "elasticd-bench: bad argument '%s' (see --help)\n", a.c_str());
      return kExitUsage;
    }
    opts[a] = argv[++i];
  }
  try {
    if (cmd == "generate") return Generate(opts);
    if (cmd == "replay") return Replay(opts);
    if (cmd == "metrics") return Metrics(opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "elasticd-bench: %s\n", e.what());
    return kExitFailure;
  }
  std::fprintf(stderr, "elasticd-bench: unknown command '%s' (see --help)\n", cmd.c_str());
  return kExitUsage;
}
