#include "elastic/optimizer/cbc_oracle.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace elastic::optimizer {

namespace {

// The LP file: maximise sum v x, one "at most one item" row per job, one capacity row per type;
// x binary when `integer`, else in [0, 1] (the job rows bound it).
void WriteLp(const MckpProblem& p, const std::string& path, bool integer) {
  std::ofstream out(path);
  out.precision(17);
  out << "Maximize\n obj:";
  bool any = false;
  for (size_t j = 0; j < p.num_jobs(); ++j) {
    for (uint32_t i = p.job_begin[j]; i < p.job_begin[j + 1]; ++i) {
      out << (any ? " + " : " ") << p.items[i].value << " x" << j << "_" << (i - p.job_begin[j]);
      any = true;
      if (i % 8 == 7) out << "\n";
    }
  }
  if (!any) out << " 0 dummy";
  out << "\nSubject To\n";
  for (size_t j = 0; j < p.num_jobs(); ++j) {
    if (p.job_begin[j] == p.job_begin[j + 1]) continue;
    out << " j" << j << ":";
    for (uint32_t i = p.job_begin[j]; i < p.job_begin[j + 1]; ++i) {
      out << (i == p.job_begin[j] ? " " : " + ") << "x" << j << "_" << (i - p.job_begin[j]);
    }
    out << " <= 1\n";
  }
  for (size_t t = 0; t < p.capacity.size(); ++t) {
    out << " t" << t << ":";
    bool first = true;
    for (size_t j = 0; j < p.num_jobs(); ++j) {
      for (uint32_t i = p.job_begin[j]; i < p.job_begin[j + 1]; ++i) {
        if (static_cast<size_t>(p.items[i].type) != t) continue;
        out << (first ? " " : " + ") << p.items[i].gpus << " x" << j << "_" << (i - p.job_begin[j]);
        if (i % 8 == 7) out << "\n";
        first = false;
      }
    }
    if (first) out << " 0 dummy";
    out << " <= " << p.capacity[t] << "\n";
  }
  if (integer) {
    out << "Binary\n";
    for (size_t j = 0; j < p.num_jobs(); ++j) {
      for (uint32_t i = p.job_begin[j]; i < p.job_begin[j + 1]; ++i) out << " x" << j << "_" << (i - p.job_begin[j]) << "\n";
    }
    if (!any) out << " dummy\n";
  }
  out << "End\n";
}

// Runs `cbc MODEL ARGS solu SOL` on the problem written by WriteLp in a fresh temporary
// directory; returns the solution file's lines (the first is the status line).
Result<std::vector<std::string>> RunCbc(const MckpProblem& problem, bool integer, const std::string& args,
                                        double& wall_ms) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "elastic-cbc-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return Status(ErrorKind::kInternal, "cannot create a temporary directory");
  const fs::path dir(tmpl);
  const std::string lp = (dir / "model.lp").string();
  const std::string sol = (dir / "model.sol").string();
  WriteLp(problem, lp, integer);
  std::ostringstream cmd;
  cmd << "cbc '" << lp << "' " << args << " solu '" << sol << "' > '" << (dir / "cbc.log").string() << "' 2>&1";
  const auto start = std::chrono::steady_clock::now();
  const int rc = std::system(cmd.str().c_str());
  wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::ifstream in(sol);
  std::vector<std::string> lines;
  for (std::string line; in && std::getline(in, line);) lines.push_back(line);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (rc != 0 || lines.empty()) {
    return Status(ErrorKind::kUnavailable, "cbc failed (exit status " + std::to_string(rc) +
                                               "); is the Debian package coinor-cbc installed?");
  }
  return lines;
}

}  // namespace

Result<CbcResult> SolveWithCbc(const MckpProblem& problem, double time_limit_s) {
  std::ostringstream args;
  args << "sec " << time_limit_s << " ratioGap 0 allowableGap 1e-9 threads 1 solve";
  CbcResult r;
  Result<std::vector<std::string>> lines = RunCbc(problem, true, args.str(), r.wall_ms);
  if (!lines.ok()) return lines.status();
  const std::string& status_line = lines.value().front();
  r.optimal = status_line.rfind("Optimal", 0) == 0;
  r.choice.assign(problem.num_jobs(), -1);
  for (size_t l = 1; l < lines.value().size(); ++l) {
    const std::string& line = lines.value()[l];
    std::istringstream ls(line);
    std::string idx, name;
    double value = 0.0;
    if (!(ls >> idx >> name >> value)) continue;
    if (name.size() < 2 || name[0] != 'x' || value < 0.5) continue;
    const size_t us = name.find('_');
    if (us == std::string::npos) continue;
    const size_t j = std::stoul(name.substr(1, us - 1));
    const int32_t k = static_cast<int32_t>(std::stol(name.substr(us + 1)));
    if (j < r.choice.size()) r.choice[j] = k;
  }
  for (size_t j = 0; j < r.choice.size(); ++j) {
    if (r.choice[j] >= 0) r.objective += problem.items[problem.job_begin[j] + static_cast<uint32_t>(r.choice[j])].value;
  }
  if (status_line.empty()) return Status(ErrorKind::kInternal, "cbc wrote an empty solution file");
  return r;
}

Result<double> SolveLpRelaxationWithCbc(const MckpProblem& problem, double time_limit_s) {
  std::ostringstream args;
  args << "sec " << time_limit_s << " initialSolve";
  double wall_ms = 0.0;
  Result<std::vector<std::string>> lines = RunCbc(problem, false, args.str(), wall_ms);
  if (!lines.ok()) return lines.status();
  // "Optimal - objective value 4.00000000"
  const std::string& status_line = lines.value().front();
  const std::string marker = "objective value";
  const size_t at = status_line.find(marker);
  if (status_line.rfind("Optimal", 0) != 0 || at == std::string::npos) {
    return Status(ErrorKind::kInternal, "cbc did not solve the LP relaxation: " + status_line);
  }
  return std::stod(status_line.substr(at + marker.size()));
}

}  // namespace elastic::optimizer
