#include "elastic/simulator/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace elastic::simulator {
namespace {

double NearestRank(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return Status(ErrorKind::kInvalidArgument, path + ": cannot write");
  f << text;
  if (!f) return Status(ErrorKind::kInvalidArgument, path + ": write failed");
  return Status::Ok();
}

}  // namespace

Summary Summarise(const SimResult& r, double horizon_s) {
  Summary s;
  s.jobs = r.jobs.size();
  s.horizon_s = horizon_s;
  std::vector<double> jcts;
  double last = 0.0;
  double rescales = 0.0;
  for (const JobResult& j : r.jobs) {
    s.gpu_hours += j.gpu_seconds / 3600.0;
    rescales += j.rescales;
    if (!j.finished()) continue;
    ++s.jobs_finished_all;
    if (horizon_s <= 0.0 || j.finish_s <= horizon_s) ++s.jobs_finished;
    jcts.push_back(j.jct());
    last = std::max(last, j.finish_s);
  }
  std::sort(jcts.begin(), jcts.end());
  if (!jcts.empty()) {
    double sum = 0.0;
    for (double v : jcts) sum += v;
    s.avg_jct_s = sum / static_cast<double>(jcts.size());
    s.median_jct_s = jcts.size() % 2 ? jcts[jcts.size() / 2] : 0.5 * (jcts[jcts.size() / 2 - 1] + jcts[jcts.size() / 2]);
    s.p99_jct_s = NearestRank(jcts, 0.99);
  }
  s.makespan_s = s.jobs_finished_all == s.jobs ? last : r.end_s;
  if (s.makespan_s > 0.0 && r.total_gpus > 0) s.utilisation = s.gpu_hours * 3600.0 / (r.total_gpus * s.makespan_s);
  s.rescales_per_job = s.jobs ? rescales / static_cast<double>(s.jobs) : 0.0;
  s.solve_ms_total = r.solve_ms_total;
  s.wall_ms = r.wall_ms;
  return s;
}

nlohmann::json ToJson(const Summary& s) {
  nlohmann::json j;
  j["jobs"] = s.jobs;
  j["jobs_finished"] = s.jobs_finished;
  j["jobs_finished_all"] = s.jobs_finished_all;
  if (s.horizon_s > 0.0) j["horizon_s"] = s.horizon_s;
  j["avg_jct_s"] = s.avg_jct_s;
  j["median_jct_s"] = s.median_jct_s;
  j["p99_jct_s"] = s.p99_jct_s;
  j["makespan_s"] = s.makespan_s;
  j["gpu_hours"] = s.gpu_hours;
  j["utilisation"] = s.utilisation;
  j["rescales_per_job"] = s.rescales_per_job;
  j["solve_ms_total"] = s.solve_ms_total;
  j["wall_ms"] = s.wall_ms;
  return j;
}

std::string JobsCsv(const SimResult& r) {
  std::ostringstream o;
  o << "name,app,arrival_s,start_s,finish_s,jct_s,gpu_hours,rescales,max_gpus,last_batch\n";
  for (const JobResult& j : r.jobs) {
    o << j.name << ',' << j.app << ',' << Num(j.arrival_s) << ',' << (j.start_s >= 0 ? Num(j.start_s) : "") << ','
      << (j.finished() ? Num(j.finish_s) : "") << ',' << (j.finished() ? Num(j.jct()) : "") << ','
      << Num(j.gpu_seconds / 3600.0) << ',' << j.rescales << ',' << j.max_gpus_used << ',' << j.last_batch << '\n';
  }
  return o.str();
}

std::string EpochsCsv(const SimResult& r) {
  std::ostringstream o;
  o << "time_s,gpus_allocated,jobs_running,jobs_pending\n";
  for (const EpochRecord& e : r.epochs) {
    o << Num(e.time_s) << ',' << e.gpus_allocated << ',' << e.jobs_running << ',' << e.jobs_pending << '\n';
  }
  return o.str();
}

Status WriteOutputs(const SimResult& r, const Summary& s, const std::string& dir, const std::string& title) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(ErrorKind::kInvalidArgument, dir + ": " + ec.message());
  if (Status st = WriteFile(dir + "/jobs.csv", JobsCsv(r)); !st.ok()) return st;
  if (Status st = WriteFile(dir + "/epochs.csv", EpochsCsv(r)); !st.ok()) return st;
  if (Status st = WriteFile(dir + "/summary.json", ToJson(s).dump(2) + "\n"); !st.ok()) return st;
  // JCT CDF data: sorted JCTs with their cumulative fraction.
  std::vector<double> jcts;
  for (const JobResult& j : r.jobs) {
    if (j.finished()) jcts.push_back(j.jct());
  }
  std::sort(jcts.begin(), jcts.end());
  std::ostringstream cdf;
  for (size_t i = 0; i < jcts.size(); ++i) {
    cdf << Num(jcts[i] / 3600.0) << ' ' << Num(static_cast<double>(i + 1) / static_cast<double>(r.jobs.size())) << '\n';
  }
  if (Status st = WriteFile(dir + "/jct_cdf.dat", cdf.str()); !st.ok()) return st;
  std::string safe_title;
  for (char c : title) safe_title += (c == '"' || c == '\\') ? '_' : c;
  std::ostringstream gp;
  gp << "set terminal svg size 800,480 dynamic\n"
     << "set datafile separator whitespace\n"
     << "set output '" << dir << "/jct_cdf.svg'\n"
     << "set title \"JCT CDF: " << safe_title << "\"\n"
     << "set xlabel 'job completion time [h]'\nset ylabel 'fraction of jobs'\nset logscale x\nset grid\n"
     << "set yrange [0:1]\nset key off\n"
     << "plot '" << dir << "/jct_cdf.dat' using 1:2 with steps lw 2\n";
  if (!r.epochs.empty()) {  // none for isolated runs: no GPUs-in-use plot
    gp << "unset logscale x\nset datafile separator ','\n"
       << "set output '" << dir << "/gpus.svg'\n"
       << "set title \"GPUs in use: " << safe_title << "\"\n"
       << "set xlabel 'time [h]'\nset ylabel 'GPUs allocated'\nset yrange [0:" << r.total_gpus + 4 << "]\n"
       << "plot '" << dir << "/epochs.csv' every ::1 using ($1/3600):2 with steps lw 2\n";
  }
  const std::string script = dir + "/plots.gp";
  if (Status st = WriteFile(script, gp.str()); !st.ok()) return st;
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return Status(ErrorKind::kUnavailable, "gnuplot not found (Debian package gnuplot-nox): plots not drawn, " + script + " written");
  }
  const std::string cmd = "gnuplot '" + script + "' 2>'" + dir + "/gnuplot.log'";
  if (std::system(cmd.c_str()) != 0) {
    return Status(ErrorKind::kUnavailable, "gnuplot failed (see " + dir + "/gnuplot.log)");
  }
  std::filesystem::remove(dir + "/gnuplot.log", ec);
  return Status::Ok();
}

}  // namespace elastic::simulator
