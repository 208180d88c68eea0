#include "elastic/optimizer/cbc_oracle.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace elastic::optimizer {

namespace {

// The LP file: maximise sum v x, one "at most one item" row per job, one capacity row per type.
void WriteLp(const MckpProblem& p, const std::string& path) {
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
  out << "Binary\n";
  for (size_t j = 0; j < p.num_jobs(); ++j) {
    for (uint32_t i = p.job_begin[j]; i < p.job_begin[j + 1]; ++i) out << " x" << j << "_" << (i - p.job_begin[j]) << "\n";
  }
  if (!any) out << " dummy\n";
  out << "End\n";
}

}  // namespace

Result<CbcResult> SolveWithCbc(const MckpProblem& problem, double time_limit_s) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "elastic-cbc-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return Status(ErrorKind::kInternal, "cannot create a temporary directory");
  const fs::path dir(tmpl);
  const std::string lp = (dir / "model.lp").string();
  const std::string sol = (dir / "model.sol").string();
  WriteLp(problem, lp);
  std::ostringstream cmd;
  cmd << "cbc '" << lp << "' sec " << time_limit_s << " ratioGap 0 allowableGap 1e-9 threads 1 solve solu '" << sol
      << "' > '" << (dir / "cbc.log").string() << "' 2>&1";
  const auto start = std::chrono::steady_clock::now();
  const int rc = std::system(cmd.str().c_str());
  CbcResult r;
  r.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::ifstream in(sol);
  if (rc != 0 || !in) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    return Status(ErrorKind::kUnavailable, "cbc failed (exit status " + std::to_string(rc) +
                                               "); is the Debian package coinor-cbc installed?");
  }
  std::string status_line;
  std::getline(in, status_line);
  r.optimal = status_line.rfind("Optimal", 0) == 0;
  r.choice.assign(problem.num_jobs(), -1);
  std::string line;
  while (std::getline(in, line)) {
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
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (status_line.empty()) return Status(ErrorKind::kInternal, "cbc wrote an empty solution file");
  return r;
}

}  // namespace elastic::optimizer
