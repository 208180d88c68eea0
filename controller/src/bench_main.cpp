// elasticd-bench: the controller's epoch stages (snapshot -> plan -> diff) on recorded or
// generated views of a cluster, without Slurm. Prints one JSON line per run.
//
//   elasticd-bench generate [--nodes N] [--gpus-per-node G] [--types T] [--jobs J] [--pending P] [--seed S]
//   elasticd-bench replay --snapshot FILE [--repeat N] [--policy NAME]
//   elasticctl snapshot > FILE     (records one from a running elasticd)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "controller.h"
#include "db.h"
#include "elastic/common/log.h"
#include "snapshot.h"

namespace {

using namespace elastic;
using namespace elastic::controller;

enum ExitCode { kOk = 0, kFailure = 1, kUsage = 2 };

void Usage(std::FILE* out) {
  std::fprintf(out,
               "Usage: elasticd-bench generate [--nodes N] [--gpus-per-node G] [--types T] [--jobs J] [--pending P]\n"
               "                               [--seed S]\n"
               "       elasticd-bench replay --snapshot FILE [--repeat N] [--policy NAME]\n\n"
               "generate: prints a synthetic recorded snapshot (JSON) of a cluster with running elastic jobs.\n"
               "replay:   runs elasticd's epoch stages (dry run: snapshot, plan, diff) on a recorded snapshot\n"
               "          (from `elasticctl snapshot` or `generate`) and prints one JSON line with the median\n"
               "          time of each stage in ms. Defaults: 2500 nodes x 8 GPUs, 3 types, 10000 jobs, 200\n"
               "          pending, seed 1; 5 repeats, policy dp.\n");
}

int Generate(const std::map<std::string, std::string>& o) {
  auto get = [&](const char* k, int d) { return o.count(k) ? std::atoi(o.at(k).c_str()) : d; };
  RecordedSnapshot s = GenerateSnapshot(get("--nodes", 2500), get("--gpus-per-node", 8), get("--types", 3),
                                        get("--jobs", 10000), get("--pending", 200),
                                        static_cast<uint64_t>(get("--seed", 1)));
  std::cout << SnapshotToJson(s.nodes, s.jobs, s.registry).dump() << "\n";
  return kOk;
}

int Replay(const std::map<std::string, std::string>& o) {
  if (!o.count("--snapshot")) {
    std::fprintf(stderr, "elasticd-bench: replay needs --snapshot FILE\n");
    return kUsage;
  }
  std::ifstream in(o.at("--snapshot"));
  if (!in) {
    std::fprintf(stderr, "elasticd-bench: cannot read %s\n", o.at("--snapshot").c_str());
    return kFailure;
  }
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) {
    std::fprintf(stderr, "elasticd-bench: %s is not JSON\n", o.at("--snapshot").c_str());
    return kFailure;
  }
  if (j.contains("snapshot")) j = j["snapshot"];  // elasticctl's reply as it prints it
  auto snap = SnapshotFromJson(j);
  if (!snap.ok()) {
    std::fprintf(stderr, "elasticd-bench: %s\n", snap.status().message().c_str());
    return kFailure;
  }
  auto db = Database::Open(":memory:");
  if (!db.ok()) {
    std::fprintf(stderr, "elasticd-bench: %s\n", db.status().message().c_str());
    return kFailure;
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
  for (int i = 0; i < repeat; ++i) {
    EpochResult r = ctl.Epoch(snap.value().nodes, snap.value().jobs, /*dry_run=*/true);
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
  nlohmann::json out{{"bench", "controller_stages"},
                     {"policy", cfg.policy},
                     {"nodes", snap.value().nodes.size()},
                     {"jobs", snap.value().jobs.size()},
                     {"elastic", snap.value().registry.size()},
                     {"repeat", repeat},
                     {"total_ms", median(totals)},
                     {"grows", grows},
                     {"shrinks", shrinks},
                     {"target_ms", 1000}};
  for (const auto& [k, v] : stages) out[k + "_ms"] = median(v);
  std::cout << out.dump() << "\n";
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    Usage(stderr);
    return kUsage;
  }
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help") {
    Usage(stdout);
    return kOk;
  }
  std::map<std::string, std::string> opts;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || i + 1 >= argc) {
      std::fprintf(stderr, "elasticd-bench: bad argument '%s' (see --help)\n", a.c_str());
      return kUsage;
    }
    opts[a] = argv[++i];
  }
  try {
    if (cmd == "generate") return Generate(opts);
    if (cmd == "replay") return Replay(opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "elasticd-bench: %s\n", e.what());
    return kFailure;
  }
  std::fprintf(stderr, "elasticd-bench: unknown command '%s' (see --help)\n", cmd.c_str());
  return kUsage;
}
