#include "elastic/report/output.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "elastic/report/period.h"

namespace elastic::report {
namespace {

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

double Round(double v, double unit) { return std::round(v / unit) * unit; }

std::string Duration(double s) {
  int64_t t = static_cast<int64_t>(std::llround(s));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  return buf;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

nlohmann::json GroupJson(const GroupRow& g, const Report& r, bool total) {
  nlohmann::json j = nlohmann::json::object();
  std::string key(GroupByName(r.options.by));
  j[key] = total ? nlohmann::json("TOTAL") : nlohmann::json(g.group);
  j["jobs"] = g.jobs;
  j["elastic_jobs"] = g.elastic_jobs;
  j["extensions"] = g.extensions;
  j["gpu_hours"] = Round(g.gpu_hours, 1e-6);
  j["extension_gpu_hours"] = Round(g.extension_gpu_hours, 1e-6);
  j["extension_share"] = Round(g.extension_share, 1e-6);
  j["rescales"] = r.have_journal ? nlohmann::json(g.rescales) : nlohmann::json(nullptr);
  j["rescale_pause_s"] = r.have_journal ? nlohmann::json(Round(g.rescale_pause_s, 1e-3)) : nlohmann::json(nullptr);
  j["job_hours"] = Round(g.job_hours, 1e-6);
  j["avg_job_gpus"] = Round(g.avg_job_gpus, 1e-4);
  j["peak_job_gpus"] = g.peak_job_gpus;
  j["queue_wait_mean_s"] = Round(g.queue_wait_mean_s, 1e-3);
  j["queue_wait_max_s"] = Round(g.queue_wait_max_s, 1e-3);
  j["time_saved_h"] = r.have_journal ? nlohmann::json(Round(g.time_saved_h, 1e-6)) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json SweepJson(const SweepUsage& s) {
  nlohmann::json trials = nlohmann::json::array();
  for (const TrialUsage& t : s.trials) {
    trials.push_back({{"task", t.task}, {"job_id", t.job_id}, {"steps", t.steps}, {"state", t.state},
                      {"result", t.result}, {"own_gpu_hours", t.own_gpu_s / 3600.0},
                      {"fused_gpu_hours", t.fused_gpu_s / 3600.0}, {"gpu_hours", t.GpuHours()}});
  }
  return {{"array_job", s.array_job}, {"leader", s.leader}, {"account", s.account}, {"user", s.user},
          {"leader_gpu_hours", s.leader_gpu_s / 3600.0}, {"gpu_hours", s.array_gpu_s / 3600.0}, {"trials", trials}};
}

std::vector<std::string> CsvRow(const GroupRow& g, const Report& r) {
  auto opt = [&](std::string v) { return r.have_journal ? v : std::string(); };
  return {CsvField(g.group),
          std::to_string(g.jobs),
          std::to_string(g.elastic_jobs),
          std::to_string(g.extensions),
          Fixed(g.gpu_hours, 6),
          Fixed(g.extension_gpu_hours, 6),
          Fixed(g.extension_share, 6),
          opt(std::to_string(g.rescales)),
          opt(Fixed(g.rescale_pause_s, 3)),
          Fixed(g.job_hours, 6),
          Fixed(g.avg_job_gpus, 4),
          std::to_string(g.peak_job_gpus),
          Fixed(g.queue_wait_mean_s, 3),
          Fixed(g.queue_wait_max_s, 3),
          opt(Fixed(g.time_saved_h, 6))};
}

}  // namespace

Result<Format> ParseFormat(std::string_view text) {
  if (text == "table") return Format::kTable;
  if (text == "csv") return Format::kCsv;
  if (text == "json") return Format::kJson;
  if (text == "html") return Format::kHtml;
  return Status(ErrorKind::kInvalidArgument,
                "--format: unknown format '" + std::string(text) + "'; expected table, csv, json or html");
}

std::vector<std::string> ColumnNames(GroupBy by) {
  return {std::string(GroupByName(by)), "jobs", "elastic_jobs", "extensions", "gpu_hours", "extension_gpu_hours",
          "extension_share", "rescales", "rescale_pause_s", "job_hours", "avg_job_gpus", "peak_job_gpus",
          "queue_wait_mean_s", "queue_wait_max_s", "time_saved_h"};
}

std::string RenderCsv(const Report& r) {
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + cells[i];
    out += "\n";
  };
  line(ColumnNames(r.options.by));
  for (const auto& g : r.groups) line(CsvRow(g, r));
  return out;
}

std::string RenderJson(const Report& r) {
  nlohmann::json j;
  j["report"] = "elastic-report";
  j["schema"] = 1;
  j["since"] = FormatTime(r.options.since);
  j["until"] = FormatTime(r.options.until);
  j["by"] = GroupByName(r.options.by);
  j["clipped"] = r.options.clip;
  j["journal"] = r.have_journal;
  j["groups"] = nlohmann::json::array();
  for (const auto& g : r.groups) j["groups"].push_back(GroupJson(g, r, false));
  j["total"] = GroupJson(r.total, r, true);
  j["sweeps"] = nlohmann::json::array();
  for (const auto& sw : r.sweeps) j["sweeps"].push_back(SweepJson(sw));
  j["warnings"] = r.warnings;
  return j.dump(2) + "\n";
}

std::string RenderTable(const Report& r) {
  std::vector<std::string> head = {std::string(GroupByName(r.options.by)), "JOBS", "ELASTIC", "EXT-JOBS", "GPU-H",
                                   "EXT-GPU-H", "EXT%", "RESCALES", "PAUSED", "AVG-GPUS", "PEAK-GPUS",
                                   "WAIT-MEAN", "WAIT-MAX", "SAVED-H"};
  for (auto& c : head) {
    for (auto& ch : c) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  auto row = [&](const GroupRow& g) {
    auto opt = [&](std::string v) { return r.have_journal ? v : std::string("-"); };
    return std::vector<std::string>{g.group,
                                    std::to_string(g.jobs),
                                    std::to_string(g.elastic_jobs),
                                    std::to_string(g.extensions),
                                    Fixed(g.gpu_hours, 2),
                                    Fixed(g.extension_gpu_hours, 2),
                                    Fixed(100.0 * g.extension_share, 1),
                                    opt(std::to_string(g.rescales)),
                                    opt(Duration(g.rescale_pause_s)),
                                    Fixed(g.avg_job_gpus, 2),
                                    std::to_string(g.peak_job_gpus),
                                    Duration(g.queue_wait_mean_s),
                                    Duration(g.queue_wait_max_s),
                                    opt(Fixed(g.time_saved_h, 2))};
  };
  std::vector<std::vector<std::string>> rows{head};
  for (const auto& g : r.groups) rows.push_back(row(g));
  rows.push_back(row(r.total));
  std::vector<size_t> width(head.size(), 0);
  for (const auto& rw : rows) {
    for (size_t i = 0; i < rw.size(); ++i) width[i] = std::max(width[i], rw[i].size());
  }
  std::string out = "GPU usage " + FormatTime(r.options.since) + " .. " + FormatTime(r.options.until) + " by " +
                    std::string(GroupByName(r.options.by)) +
                    (r.options.clip ? "" : " (whole allocations)") + (r.have_journal ? "" : " (no journal: --db)") +
                    "\n";
  auto emit = [&](const std::vector<std::string>& rw) {
    std::string line;
    for (size_t i = 0; i < rw.size(); ++i) {
      std::string pad(width[i] - rw[i].size(), ' ');
      line += i == 0 ? rw[i] + pad : "  " + pad + rw[i];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i + 1 == rows.size()) {
      size_t total_width = 0;
      for (size_t w : width) total_width += w + 2;
      out += std::string(total_width - 2, '-') + "\n";
    }
    emit(rows[i]);
  }
  for (const SweepUsage& sw : r.sweeps) {
    out += "\nFused sweep " + std::to_string(sw.array_job) + " (leader job " + std::to_string(sw.leader) + ", " +
           sw.user + "/" + sw.account + "): " + Fixed(sw.array_gpu_s / 3600.0, 4) + " GPU-h, split by trial-steps\n";
    for (const TrialUsage& t : sw.trials) {
      out += "  " + t.job_id + "  steps " + std::to_string(t.steps) + "  " + (t.state.empty() ? "-" : t.state) +
             "  GPU-h " + Fixed(t.GpuHours(), 4) + " (fused " + Fixed(t.fused_gpu_s / 3600.0, 4) + ", own " +
             Fixed(t.own_gpu_s / 3600.0, 4) + ")\n";
    }
  }
  return out;
}

}  // namespace elastic::report
