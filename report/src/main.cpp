// elastic-report: GPU usage per account, user, partition or job over a period, from Slurm
// accounting (sacct) and elasticd's journal. docs/report.md is the manual.
#include <boost/program_options.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "elastic/common/cli_options.h"
#include "elastic/common/config.h"
#include "elastic/common/exit_codes.h"
#include "elastic/report/journal.h"
#include "elastic/report/output.h"
#include "elastic/report/period.h"
#include "elastic/report/report.h"
#include "elastic/report/sacct.h"

namespace po = boost::program_options;
using namespace elastic;
using namespace elastic::report;

namespace {

// Exit codes: kExitOk, kExitFailure (a source could not be read: sacct, the journal; or the
// output not written), kExitUsage (bad command line).
const cli::Prologue kPrologue{"elastic-report", "\nTry 'elastic-report --help'.\n", "",
                              "\nExit status: 0 success, 1 a source (sacct, the database) or the output failed, "
                              "2 bad usage.\n"};

struct Options {
  std::string since = "now-7days", until = "now", by = "account", format = "table";
  std::string db, sacct = "sacct", output, job;
  bool whole_jobs = false;
};

int Fail(int code, const std::string& msg) {
  if (code == kExitUsage) return cli::UsageError(kPrologue, msg);
  std::cerr << "elastic-report: " << msg << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  po::options_description desc(
      "Usage: elastic-report [options]\n"
      "GPU usage over a period, grouped by account, user, partition or job: GPU-hours (jobs and their\n"
      "elastic extensions, from sacct), the share from extensions, rescales and their pauses, average and\n"
      "peak job size, queue wait and the estimated time saved against running rigid (from elasticd's journal).\n"
      "Times: YYYY-MM-DD[THH:MM[:SS]] (local), now, now-COUNT[seconds|minutes|hours|days|weeks], today, "
      "yesterday.\n\nOptions");
  desc.add_options()
      ("help,h", "show this help and exit")
      ("since,S", po::value(&opt.since)->default_value(opt.since), "start of the period")
      ("until,E", po::value(&opt.until)->default_value(opt.until), "end of the period")
      ("by,b", po::value(&opt.by)->default_value(opt.by), "group by account, user, partition or job")
      ("format,f", po::value(&opt.format)->default_value(opt.format), "table, csv, json or html")
      ("db", po::value(&opt.db), "elasticd's state database (read-only); without it: no rescales, no time saved")
      ("sacct", po::value(&opt.sacct)->default_value(opt.sacct), "the sacct program to run (honours SLURM_CONF)")
      ("job,j", po::value(&opt.job), "html: also chart this job's GPU count over time")
      ("whole-jobs", po::bool_switch(&opt.whole_jobs),
       "count whole allocations of jobs that ran in the period (default: only the part inside it)")
      ("output,o", po::value(&opt.output), "write the report to this file instead of standard output");
  po::variables_map vm;
  if (std::optional<int> done = cli::ParseCommandLine({argv + 1, argv + argc}, desc, vm, kPrologue)) return *done;
  double now = NowSeconds();
  auto since = ParseTime(opt.since, now, "--since");
  if (!since.ok()) return Fail(kExitUsage, since.status().message());
  auto until = ParseTime(opt.until, now, "--until");
  if (!until.ok()) return Fail(kExitUsage, until.status().message());
  if (since.value() >= until.value()) {
    return Fail(kExitUsage, "--since (" + FormatTime(since.value()) + ") must be before --until (" +
                                FormatTime(until.value()) + ")");
  }
  auto by = ParseGroupBy(opt.by);
  if (!by.ok()) return Fail(kExitUsage, by.status().message());
  auto format = ParseFormat(opt.format);
  if (!format.ok()) return Fail(kExitUsage, format.status().message());
  std::optional<uint64_t> job;
  if (vm.count("job")) {
    if (format.value() != Format::kHtml) return Fail(kExitUsage, "--job is for --format html (the job chart)");
    auto j = config::ParseInt(opt.job, 1, 4294967295LL, "--job");
    if (!j.ok()) return Fail(kExitUsage, j.status().message());
    job = static_cast<uint64_t>(j.value());
  }

  std::optional<Journal> journal;
  if (!opt.db.empty()) {
    auto j = ReadJournal(opt.db);
    if (!j.ok()) return Fail(kExitFailure, j.status().message());
    journal = std::move(j).value();
  }
  auto text = RunSacct(opt.sacct, since.value(), until.value());
  if (!text.ok()) return Fail(kExitFailure, text.status().message());
  auto records = ParseSacct(text.value());
  if (!records.ok()) return Fail(kExitFailure, records.status().message());

  ReportOptions ro;
  ro.since = since.value();
  ro.until = until.value();
  ro.now = now;
  ro.by = by.value();
  ro.clip = !opt.whole_jobs;
  Report rep = BuildReport(records.value(), journal ? &*journal : nullptr, ro);
  std::optional<JobTimeline> timeline;
  if (job) {
    auto tl = BuildJobTimeline(*job, records.value(), journal ? &*journal : nullptr, now);
    if (!tl.ok()) return Fail(kExitFailure, tl.status().message());
    timeline = std::move(tl).value();
  }
  std::string out;
  switch (format.value()) {
    case Format::kTable: out = RenderTable(rep); break;
    case Format::kCsv: out = RenderCsv(rep); break;
    case Format::kJson: out = RenderJson(rep); break;
    case Format::kHtml: out = RenderHtml(rep, timeline); break;
  }
  for (const auto& w : rep.warnings) std::cerr << "elastic-report: warning: " << w << "\n";
  if (opt.output.empty()) {
    std::cout << out << std::flush;
    if (!std::cout) return Fail(kExitFailure, "cannot write to standard output");
  } else {
    std::ofstream f(opt.output, std::ios::binary | std::ios::trunc);
    f << out;
    f.close();
    if (!f) return Fail(kExitFailure, "cannot write " + opt.output);
  }
  return kExitOk;
}
