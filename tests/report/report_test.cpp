// Unit tests of elastic-report: time parsing, sacct parsing (with exact messages for malformed
// lines), the journal reader on a real elasticd state database, the aggregation against
// hand-computed figures, and the CSV/JSON schemas. One file (over 600 lines): the unit tests of one
// small program, five short suites against the one fixture of fixture.h (the sacct text and the
// state database every figure is computed from); a suite that grows gets a file of its own.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "db.h"
#include "elastic/report/journal.h"
#include "elastic/report/output.h"
#include "elastic/report/period.h"
#include "elastic/report/report.h"
#include "elastic/report/sacct.h"
#include "fixture.h"

namespace elastic::report {
namespace {

using testing::MakeStateDb;
using testing::SacctText;
using testing::T10;

std::string TempPath(const std::string& name) {
  std::string dir = ::testing::TempDir();
  return dir + "report-" + std::to_string(getpid()) + "-" + name;
}

// ------------------------------------------------------------------ times
TEST(ReportTime, AcceptedForms) {
  double now = T10() + 3600.5;
  struct Case {
    const char* text;
    double expected;
  } cases[] = {
      {"2026-11-20T10:00:00", T10()},
      {"2026-11-20T10:00", T10()},
      {"2026-11-20", T10() - 10 * 3600},
      {"now", now},
      {"now-7days", now - 7 * 86400},
      {"now-1day", now - 86400},
      {"now-2hours", now - 7200},
      {"now-30minutes", now - 1800},
      {"now-90", now - 90},
      {"now+1week", now + 7 * 86400},
      {"now-3d", now - 3 * 86400},
      {"today", T10() - 10 * 3600},
      {"yesterday", T10() - 34 * 3600},
  };
  for (const auto& c : cases) {
    auto r = ParseTime(c.text, now, "--since");
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().message();
    EXPECT_DOUBLE_EQ(r.value(), c.expected) << c.text;
  }
  EXPECT_EQ(FormatTime(T10()), "2026-11-20T10:00:00");
}

TEST(ReportTime, RefusedFormsWithExactMessages) {
  const std::string forms =
      "; expected YYYY-MM-DD[THH:MM[:SS]], now, now-COUNT[seconds|minutes|hours|days|weeks], today or yesterday";
  struct Case {
    const char* text;
    std::string message;
  } cases[] = {
      {"", "--since: cannot read '' as a time (empty)" + forms},
      {"2026-13-01", "--since: cannot read '2026-13-01' as a time (no such date or time)" + forms},
      {"2026-02-29", "--since: cannot read '2026-02-29' as a time (no such date or time)" + forms},
      {"2026-11-20 10:00", "--since: cannot read '2026-11-20 10:00' as a time" + forms},
      {"2026-11-20T25:00", "--since: cannot read '2026-11-20T25:00' as a time (no such date or time)" + forms},
      {"2026-11-20T10:00:00Z", "--since: cannot read '2026-11-20T10:00:00Z' as a time" + forms},
      {"now-7fortnights", "--since: cannot read 'now-7fortnights' as a time (unknown unit 'fortnights')" + forms},
      {"now-days", "--since: cannot read 'now-days' as a time (no count after the sign)" + forms},
      {"nowish", "--since: cannot read 'nowish' as a time" + forms},
      {"last week", "--since: cannot read 'last week' as a time" + forms},
  };
  for (const auto& c : cases) {
    auto r = ParseTime(c.text, 0, "--since");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
  }
}

// ------------------------------------------------------------------ sacct
TEST(ReportSacct, ParsesTheFixture) {
  auto r = ParseSacct(SacctText());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& recs = r.value();
  ASSERT_EQ(recs.size(), 7u);
  EXPECT_EQ(recs[0].job_id, "100");
  EXPECT_EQ(recs[0].gpus, 2);
  EXPECT_EQ(recs[0].elapsed_s, 3600);
  EXPECT_DOUBLE_EQ(recs[0].start, T10());
  EXPECT_DOUBLE_EQ(recs[0].eligible, T10() - 600);
  EXPECT_FALSE(recs[0].extension);
  EXPECT_EQ(recs[2].gpus, 4);
  EXPECT_TRUE(recs[2].extension);
  EXPECT_EQ(recs[2].parent, 200u);
  EXPECT_EQ(recs[2].group, 1);
  EXPECT_EQ(recs[2].state, "CANCELLED by 0");
  EXPECT_TRUE(recs[4].named_extension);
  EXPECT_FALSE(recs[4].extension);
  EXPECT_EQ(recs[5].gpus, 0);
  EXPECT_EQ(recs[5].name, "cpu|only");  // JobName is last: its '|' stays in it
  EXPECT_EQ(recs[6].end, 0.0);          // Unknown
}

TEST(ReportSacct, ArrayTasksAreNamedAsSacctNamesThem) {
  // Tasks 0 and 1 of array 12 are jobs 13 and 12 (raw ids); the report names them 12_0 and 12_1,
  // and an extension of task 0 (parent=13, its raw id) is counted with it.
  const std::string times = "|2026-11-20T10:00:00|2026-11-20T10:00:00|2026-11-20T10:00:00|2026-11-20T11:00:00|";
  const std::string text = "13|u|a|gpu|gres/gpu=1|3600" + times + "COMPLETED||12_0|sweep\n" +
                           "12|u|a|gpu|gres/gpu=1|3600" + times + "COMPLETED||12_1|sweep\n" +
                           "14|u|a|gpu|gres/gpu=1|1800" + times + "CANCELLED by 0|elastic-ext parent=13 group=1|14|" +
                           "elastic-ext:13:1\n";
  auto recs = ParseSacct(text);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  EXPECT_EQ(recs.value()[0].job_id, "13");
  EXPECT_EQ(recs.value()[0].display_id, "12_0");
  ReportOptions o;
  o.since = T10() - 3600;
  o.until = T10() + 7200;
  o.now = o.until;
  o.by = GroupBy::kJob;
  Report rep = BuildReport(recs.value(), nullptr, o);
  std::map<std::string, const GroupRow*> rows;
  for (const auto& g : rep.groups) rows[g.group] = &g;
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_TRUE(rows.count("12_0") && rows.count("12_1"));
  EXPECT_EQ(rows["12_0"]->extensions, 1);
  EXPECT_EQ(rows["12_1"]->extensions, 0);
}

TEST(ReportSacct, TresAndComments) {
  EXPECT_EQ(GpusOfTres("billing=2,cpu=2,gres/gpu:a100=4,gres/gpu=4,node=2").value(), 4);
  EXPECT_EQ(GpusOfTres("cpu=1,gres/gpu:a100=3").value(), 0);  // only the untyped total counts
  EXPECT_EQ(GpusOfTres("").value(), 0);
  EXPECT_EQ(GpusOfTres("gres/gpu=-1").status().message(), "AllocTRES gres/gpu '-1' is not a count");
  struct Case {
    const char* comment;
    bool ok;
    uint64_t parent;
    int64_t group;
  } cases[] = {
      {"elastic-ext parent=4711 group=3", true, 4711, 3},
      {"elastic-ext parent=1 group=0", true, 1, 0},
      {"elastic-ext parent=4711", false, 0, 0},
      {"elastic-ext parent=0 group=1", false, 0, 0},
      {"elastic-ext parent=47x1 group=1", false, 0, 0},
      {"elastic-ext parent=4711 group=1 extra", false, 0, 0},
      {"elastic-ext  parent=4711 group=1", false, 0, 0},
      {"user comment", false, 0, 0},
      {"", false, 0, 0},
  };
  for (const auto& c : cases) {
    auto link = ParseExtensionComment(c.comment);
    EXPECT_EQ(link.has_value(), c.ok) << c.comment;
    if (link && c.ok) {
      EXPECT_EQ(link->parent, c.parent);
      EXPECT_EQ(link->group, c.group);
    }
  }
}

TEST(ReportSacct, MalformedLinesWithExactMessages) {
  const std::string ok_tail = "|2026-11-20T10:00:00|2026-11-20T10:00:00|2026-11-20T10:00:00|2026-11-20T11:00:00|COMPLETED||5|n";
  struct Case {
    std::string text;
    std::string message;
  } cases[] = {
      {"1|a|b", "sacct output line 1: expected 14 fields separated by '|', got 3: 1|a|b"},
      {"\n\n5|u|a|p|gres/gpu=1|x" + ok_tail,
       "sacct output line 3 (job 5): ElapsedRaw 'x' is not a number of seconds"},
      {"5|u|a|p|gres/gpu=abc|10" + ok_tail, "sacct output line 1 (job 5): AllocTRES gres/gpu 'abc' is not a count"},
      {"|u|a|p|gres/gpu=1|10" + ok_tail, "sacct output line 1: empty JobIDRaw"},
      {"5|u|a|p|gres/gpu=1|10|2026-11-20 10:00:00|None|Unknown|Unknown|PENDING||5|n",
       "sacct output line 1 (job 5): Submit '2026-11-20 10:00:00' is not a time of the form YYYY-MM-DDTHH:MM:SS"},
      {"5|u|a|p|gres/gpu=1|10|2026-11-20T10:00:00|2026-11-20T10:00|Unknown|Unknown|PENDING||5|n",
       "sacct output line 1 (job 5): Eligible '2026-11-20T10:00' is not a time of the form YYYY-MM-DDTHH:MM:SS"},
      {"5|u|a|p|gres/gpu=1|10|2026-11-20T10:00:00|None|11/20-10:00:00|Unknown|RUNNING||5|n",
       "sacct output line 1 (job 5): Start '11/20-10:00:00' is not a time of the form YYYY-MM-DDTHH:MM:SS"},
  };
  for (const auto& c : cases) {
    auto r = ParseSacct(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().kind(), ErrorKind::kProtocol);
    EXPECT_EQ(r.status().message(), c.message);
  }
}

TEST(ReportSacct, CommandLine) {
  auto argv = SacctCommand("/usr/bin/sacct", T10(), T10() + 86400);
  std::vector<std::string> expected = {"/usr/bin/sacct", "--parsable2", "--noheader", "--allusers", "--duplicates",
                                       "--allocations", "--starttime=2026-11-20T10:00:00",
                                       "--endtime=2026-11-21T10:00:00",
                                       "--format=JobIDRaw,User,Account,Partition,AllocTRES,ElapsedRaw,Submit,"
                                       "Eligible,Start,End,State,AdminComment,JobID,JobName"};
  EXPECT_EQ(argv, expected);
}

TEST(ReportSacct, RunSacctErrors) {
  auto missing = RunSacct("/nonexistent/sacct", 0, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "cannot run sacct '/nonexistent/sacct': No such file or directory");
  std::string script = TempPath("failing-sacct");
  {
    std::ofstream f(script);
    f << "#!/bin/sh\necho 'sacct: error: Problem talking to the database: Connection refused' >&2\nexit 1\n";
  }
  chmod(script.c_str(), 0755);
  auto failed = RunSacct(script, 0, 1);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().kind(), ErrorKind::kUnavailable);
  EXPECT_EQ(failed.status().message(),
            "sacct exited 1: sacct: error: Problem talking to the database: Connection refused");
  std::string echo = TempPath("echo-sacct");
  {
    std::ofstream f(echo);
    f << "#!/bin/sh\necho \"TF=$SLURM_TIME_FORMAT $*\"\n";
  }
  chmod(echo.c_str(), 0755);
  auto out = RunSacct(echo, T10(), T10() + 60);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out.value().rfind("TF=standard --parsable2 --noheader --allusers --duplicates --allocations "
                              "--starttime=2026-11-20T10:00:00 --endtime=2026-11-20T10:01:00",
                              0),
            0u)
      << out.value();
  std::remove(script.c_str());
  std::remove(echo.c_str());
}

// ------------------------------------------------------------------ journal
TEST(ReportJournal, ReadsARealStateDatabase) {
  std::string path = TempPath("journal.db");
  MakeStateDb(path, true);
  auto j = ReadJournal(path);
  ASSERT_TRUE(j.ok()) << j.status().message();
  ASSERT_EQ(j.value().jobs.size(), 1u);
  const JournalJob& job = j.value().jobs.at(200);
  EXPECT_EQ(job.account, "chem");
  EXPECT_EQ(job.partition, "gpu");
  EXPECT_EQ(job.base_gpus, 2);
  EXPECT_EQ(job.samples.size(), 3u);
  EXPECT_EQ(j.value().intervals.size(), 5u);
  EXPECT_EQ(j.value().rescales.size(), 5u);
  EXPECT_EQ(j.value().extensions.size(), 2u);
  EXPECT_TRUE(j.value().warnings.empty());
}

TEST(ReportJournal, ReadsWhileElasticdHoldsItOpenInWalMode) {
  std::string path = TempPath("wal.db");
  MakeStateDb(path);
  auto writer = controller::Database::Open(path);  // elasticd's connection, still open
  ASSERT_TRUE(writer.ok());
  writer.value()->Run("INSERT INTO intervals (job_id, start, end, gpus, gpu_type) VALUES (201, 1, NULL, 4, 'a100')");
  std::string mode;
  writer.value()->Run("PRAGMA journal_mode", {}, [&](sqlite3_stmt* st) { mode = controller::Database::Text(st, 0); });
  EXPECT_EQ(mode, "wal");
  auto j = ReadJournal(path);
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(j.value().intervals.size(), 6u);
  EXPECT_EQ(j.value().intervals.back().end, 0.0);  // open interval
}

TEST(ReportJournal, BadDatabasesWithExactMessages) {
  auto missing = ReadJournal("/nonexistent/state.db");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "cannot open the state database /nonexistent/state.db: unable to open database file");

  std::string other = TempPath("other.db");
  std::remove(other.c_str());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE jobs (x); CREATE TABLE extensions (x); CREATE TABLE rescales (x);", nullptr, nullptr,
               nullptr);
  sqlite3_close(db);
  auto no_table = ReadJournal(other);
  ASSERT_FALSE(no_table.ok());
  EXPECT_EQ(no_table.status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(no_table.status().message(), other + " is not an elasticd state database (it has no table 'intervals')");

  std::string text = TempPath("text.db");
  {
    std::ofstream f(text);
    f << "this is not a database, just some text that is long enough to look like a header......\n";
  }
  auto not_db = ReadJournal(text);
  ASSERT_FALSE(not_db.ok());
  EXPECT_EQ(not_db.status().message(), "cannot read the state database " + text + ": file is not a database");

  std::string broken = TempPath("broken.db");
  MakeStateDb(broken);
  {
    auto w = controller::Database::Open(broken);
    w.value()->Run("UPDATE jobs SET data = '{not json'");
  }
  auto j = ReadJournal(broken);
  ASSERT_TRUE(j.ok());
  ASSERT_EQ(j.value().warnings.size(), 1u);
  EXPECT_EQ(j.value().warnings[0].rfind("state database: job 200 has an unreadable data record (", 0), 0u)
      << j.value().warnings[0];
  std::remove(other.c_str());
  std::remove(text.c_str());
}

// ------------------------------------------------------------------ aggregation
ReportOptions Day(GroupBy by = GroupBy::kAccount) {
  ReportOptions o;
  o.since = T10() - 10 * 3600;  // 2026-11-20T00:00:00
  o.until = o.since + 86400;
  o.now = o.until;
  o.by = by;
  return o;
}

const GroupRow& Row(const Report& r, std::string_view key) {
  for (const auto& g : r.groups) {
    if (g.group == key) return g;
  }
  throw std::runtime_error("no group " + std::string(key));
}

TEST(ReportAggregate, ByAccountMatchesHandComputedFigures) {
  auto recs = ParseSacct(SacctText()).value();
  std::string path = TempPath("agg.db");
  MakeStateDb(path);
  Journal j = ReadJournal(path).value();
  Report r = BuildReport(recs, &j, Day());
  ASSERT_EQ(r.groups.size(), 3u);
  EXPECT_EQ(r.groups[0].group, "bio");
  EXPECT_EQ(r.groups[1].group, "chem");
  EXPECT_EQ(r.groups[2].group, "physics");

  const GroupRow& chem = Row(r, "chem");
  EXPECT_EQ(chem.jobs, 1);
  EXPECT_EQ(chem.elastic_jobs, 1);
  EXPECT_EQ(chem.extensions, 2);
  EXPECT_NEAR(chem.gpu_hours, 7.0, 1e-9);  // 2x2h + 4x0.5h + 2x0.5h
  EXPECT_NEAR(chem.extension_gpu_hours, 3.0, 1e-9);
  EXPECT_NEAR(chem.extension_share, 3.0 / 7.0, 1e-9);
  EXPECT_EQ(chem.rescales, 4);  // the failed grow does not count
  EXPECT_NEAR(chem.rescale_pause_s, 7.0, 1e-9);
  EXPECT_NEAR(chem.avg_job_gpus, 3.5, 1e-9);
  EXPECT_EQ(chem.peak_job_gpus, 8);  // 2 + 4 + 2 at 10:45-11:00
  EXPECT_NEAR(chem.queue_wait_mean_s, 3600, 1e-9);  // from Eligible, not Submit
  // Linear scaling (no step times): work 1800x1 + 900x3 + 900x4 + 900x2 + 2700x1 = 12600 base-seconds,
  // minus pauses 2x1 + 3x3 + 1x4 + 1x2 = 17, minus the 7200 s it took.
  EXPECT_NEAR(chem.time_saved_h, (12600.0 - 17 - 7200) / 3600, 1e-9);

  const GroupRow& physics = Row(r, "physics");
  EXPECT_EQ(physics.jobs, 2);  // 100 and 300 (named like an extension, but no admin comment); 400 has no GPUs
  EXPECT_EQ(physics.elastic_jobs, 0);
  EXPECT_NEAR(physics.gpu_hours, 3.0, 1e-9);
  EXPECT_NEAR(physics.avg_job_gpus, 1.5, 1e-9);
  EXPECT_EQ(physics.peak_job_gpus, 2);
  EXPECT_NEAR(physics.queue_wait_mean_s, 300, 1e-9);
  EXPECT_NEAR(physics.queue_wait_max_s, 600, 1e-9);
  EXPECT_EQ(physics.time_saved_h, 0.0);

  const GroupRow& bio = Row(r, "bio");  // still running: counted up to the end of the period
  EXPECT_NEAR(bio.gpu_hours, 1.0, 1e-9);

  EXPECT_EQ(r.total.jobs, 4);
  EXPECT_NEAR(r.total.gpu_hours, 11.0, 1e-9);
  EXPECT_NEAR(r.total.extension_gpu_hours, 3.0, 1e-9);
  EXPECT_EQ(r.total.peak_job_gpus, 8);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "job 300 is named 'elastic-ext:100:1' but has no elastic-ext admin comment: counted as an ordinary job "
            "of account physics");
}

TEST(ReportAggregate, OtherGroupingsAddUpToTheSameTotal) {
  auto recs = ParseSacct(SacctText()).value();
  for (GroupBy by : {GroupBy::kAccount, GroupBy::kUser, GroupBy::kPartition, GroupBy::kJob}) {
    Report r = BuildReport(recs, nullptr, Day(by));
    double sum = 0, ext = 0;
    for (const auto& g : r.groups) {
      sum += g.gpu_hours;
      ext += g.extension_gpu_hours;
    }
    EXPECT_NEAR(sum, 11.0, 1e-9) << GroupByName(by);
    EXPECT_NEAR(ext, 3.0, 1e-9) << GroupByName(by);
    EXPECT_NEAR(r.total.gpu_hours, 11.0, 1e-9);
  }
  Report by_job = BuildReport(recs, nullptr, Day(GroupBy::kJob));
  ASSERT_EQ(by_job.groups.size(), 4u);
  EXPECT_EQ(by_job.groups[0].group, "100");
  EXPECT_EQ(by_job.groups[1].group, "200");  // with its extensions 201 and 202
  EXPECT_NEAR(by_job.groups[1].gpu_hours, 7.0, 1e-9);
  EXPECT_EQ(by_job.groups[2].group, "300");
  EXPECT_EQ(by_job.groups[3].group, "500");
  Report by_user = BuildReport(recs, nullptr, Day(GroupBy::kUser));
  EXPECT_NEAR(Row(by_user, "bob").gpu_hours, 7.0, 1e-9);
  EXPECT_FALSE(by_user.have_journal);
  EXPECT_EQ(Row(by_user, "bob").rescales, 0);
  EXPECT_EQ(Row(by_user, "bob").elastic_jobs, 1);  // extensions make a job elastic without the journal
}

TEST(ReportAggregate, ClipsToThePeriodUnlessWholeJobs) {
  auto recs = ParseSacct(SacctText()).value();
  ReportOptions o = Day();
  o.since = T10() + 1800;  // 10:30 - 11:30
  o.until = T10() + 5400;
  o.now = T10() + 14 * 3600;
  Report r = BuildReport(recs, nullptr, o);
  EXPECT_NEAR(Row(r, "physics").gpu_hours, 1.0, 1e-9);  // job 100: 2 GPUs x 10:30-11:00
  // job 200: 2 GPUs x 1 h, 201: 4 x 0.5 h, 202: 2 x 0.5 h
  EXPECT_NEAR(Row(r, "chem").gpu_hours, 2.0 + 2.0 + 1.0, 1e-9);
  EXPECT_NEAR(Row(r, "chem").queue_wait_mean_s, 0, 1e-9);  // did not start in the period
  o.clip = false;
  Report whole = BuildReport(recs, nullptr, o);
  EXPECT_NEAR(Row(whole, "physics").gpu_hours, 3.0, 1e-9);
  EXPECT_NEAR(Row(whole, "chem").gpu_hours, 7.0, 1e-9);
}

TEST(ReportAggregate, ExtensionWhoseParentIsNotInSacct) {
  auto recs = ParseSacct(SacctText()).value();
  std::vector<SacctRecord> only_ext{recs[2]};
  std::string path = TempPath("orphan.db");
  MakeStateDb(path);
  Journal j = ReadJournal(path).value();
  Report r = BuildReport(only_ext, &j, Day(GroupBy::kJob));
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].group, "200");
  EXPECT_NEAR(r.groups[0].gpu_hours, 2.0, 1e-9);
  EXPECT_NEAR(r.groups[0].extension_share, 1.0, 1e-9);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "extension job 201 names parent 200, which sacct does not list for the period: attributed to job 200 of "
            "account chem (from the journal)");
}

TEST(ReportAggregate, TimeSavedUsesMeasuredStepTimes) {
  std::vector<StepSample> samples{{2, 32, 0.1}, {2, 32, 0.1}, {6, 32, 0.12}};
  bool measured = false;
  EXPECT_NEAR(RelativeSpeed(samples, 2, 6, &measured), 2.5, 1e-12);
  EXPECT_TRUE(measured);
  EXPECT_NEAR(RelativeSpeed(samples, 2, 8, &measured), 4.0, 1e-12);
  EXPECT_FALSE(measured);
  EXPECT_NEAR(RelativeSpeed(samples, 2, 2, &measured), 1.0, 1e-12);

  auto recs = ParseSacct(SacctText()).value();
  std::string path = TempPath("samples.db");
  MakeStateDb(path, true);
  Journal j = ReadJournal(path).value();
  Report r = BuildReport(recs, &j, Day(GroupBy::kJob));
  const JobUsage* job = nullptr;
  for (const auto& u : r.jobs) {
    if (u.id == 200) job = &u;
  }
  ASSERT_NE(job, nullptr);
  ASSERT_TRUE(job->saved_s.has_value());
  // 1800x1 + 900x2.5 + 900x4 + 900x2 + 2700x1 = 12150; pauses 2x1 + 3x2.5 + 1x4 + 1x2 = 15.5.
  EXPECT_NEAR(*job->saved_s, 12150.0 - 15.5 - 7200, 1e-9);
  EXPECT_EQ(job->saved_method, "mixed");
}

TEST(ReportAggregate, SeriesPerAccountAndHour) {
  auto recs = ParseSacct(SacctText()).value();
  Report r = BuildReport(recs, nullptr, Day());
  EXPECT_EQ(r.series.bucket_s, 3600);
  ASSERT_EQ(r.series.buckets, 24u);
  const auto& chem = r.series.gpu_hours.at("chem");
  EXPECT_NEAR(chem[10], 2 + 2 + 0.5, 1e-9);  // 10:00-11:00: job 200, 201 (30 min x 4), 202 (15 min x 2)
  EXPECT_NEAR(chem[11], 2 + 0.5, 1e-9);
  double total = 0;
  for (const auto& [a, v] : r.series.gpu_hours) {
    for (double x : v) total += x;
  }
  EXPECT_NEAR(total, r.total.gpu_hours, 1e-9);
  ReportOptions week = Day();
  week.since -= 6 * 86400;
  Report w = BuildReport(recs, nullptr, week);
  EXPECT_EQ(w.series.bucket_s, 86400);
  EXPECT_EQ(w.series.buckets, 7u);
}

TEST(ReportAggregate, JobTimelineFromJournalOrSacct) {
  auto recs = ParseSacct(SacctText()).value();
  std::string path = TempPath("tl.db");
  MakeStateDb(path);
  Journal j = ReadJournal(path).value();
  auto from_journal = BuildJobTimeline(200, recs, &j, T10() + 86400);
  ASSERT_TRUE(from_journal.ok());
  EXPECT_EQ(from_journal.value().source, "journal");
  std::vector<std::pair<double, int64_t>> expected{{T10(), 2},        {T10() + 1800, 6}, {T10() + 2700, 8},
                                                   {T10() + 3600, 4}, {T10() + 4500, 2}, {T10() + 7200, 0}};
  EXPECT_EQ(from_journal.value().steps, expected);
  auto from_sacct = BuildJobTimeline(200, recs, nullptr, T10() + 86400);
  ASSERT_TRUE(from_sacct.ok());
  EXPECT_EQ(from_sacct.value().source, "sacct");
  EXPECT_EQ(from_sacct.value().steps, expected);  // the same steps, from the allocations
  auto none = BuildJobTimeline(999, recs, &j, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "--job 999: neither the journal nor sacct has GPU allocations of that job in the period");
}

// ------------------------------------------------------------------ output schemas
TEST(ReportOutput, CsvSchema) {
  auto recs = ParseSacct(SacctText()).value();
  std::string path = TempPath("csv.db");
  MakeStateDb(path);
  Journal j = ReadJournal(path).value();
  Report r = BuildReport(recs, &j, Day());
  std::string csv = RenderCsv(r);
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "account,jobs,elastic_jobs,extensions,gpu_hours,extension_gpu_hours,extension_share,rescales,"
            "rescale_pause_s,job_hours,avg_job_gpus,peak_job_gpus,queue_wait_mean_s,queue_wait_max_s,time_saved_h");
  std::vector<std::string> rows;
  while (std::getline(in, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1], "chem,1,1,2,7.000000,3.000000,0.428571,4,7.000,2.000000,3.5000,8,3600.000,3600.000,1.495278");
  for (const auto& row : rows) {
    EXPECT_EQ(std::count(row.begin(), row.end(), ','), 14) << row;
  }
  Report no_journal = BuildReport(recs, nullptr, Day(GroupBy::kPartition));
  std::string csv2 = RenderCsv(no_journal);
  EXPECT_EQ(csv2.substr(0, 10), "partition,");
  EXPECT_NE(csv2.find("\ngpu,4,1,2,11.000000,3.000000,0.272727,,,"), std::string::npos) << csv2;
  SacctRecord odd = recs[0];
  odd.account = "a,\"b\"";
  Report quoted = BuildReport({odd}, nullptr, Day());
  EXPECT_NE(RenderCsv(quoted).find("\n\"a,\"\"b\"\"\",1,"), std::string::npos);
}

TEST(ReportOutput, JsonSchema) {
  auto recs = ParseSacct(SacctText()).value();
  std::string path = TempPath("json.db");
  MakeStateDb(path);
  Journal j = ReadJournal(path).value();
  Report r = BuildReport(recs, &j, Day(GroupBy::kUser));
  auto doc = nlohmann::json::parse(RenderJson(r));
  std::set<std::string> top;
  for (auto& [k, v] : doc.items()) top.insert(k);
  EXPECT_EQ(top, (std::set<std::string>{"report", "schema", "since", "until", "by", "clipped", "journal", "groups",
                                        "total", "sweeps", "warnings"}));
  EXPECT_EQ(doc["sweeps"], nlohmann::json::array());  // no fused sweep in this journal
  EXPECT_EQ(doc["by"], "user");
  EXPECT_EQ(doc["since"], "2026-11-20T00:00:00");
  EXPECT_EQ(doc["schema"], 1);
  auto names = ColumnNames(GroupBy::kUser);
  ASSERT_EQ(doc["groups"].size(), 4u);  // alice bob carol erin
  for (const auto& g : doc["groups"]) {
    std::vector<std::string> keys;
    for (auto& [k, v] : g.items()) keys.push_back(k);
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(keys, sorted);  // nlohmann orders keys
    EXPECT_TRUE(g["user"].is_string());
    for (const char* k : {"gpu_hours", "extension_gpu_hours", "extension_share", "rescale_pause_s", "avg_job_gpus",
                          "time_saved_h", "queue_wait_mean_s"}) {
      EXPECT_TRUE(g[k].is_number()) << k;
    }
    for (const char* k : {"jobs", "elastic_jobs", "extensions", "rescales", "peak_job_gpus"}) {
      EXPECT_TRUE(g[k].is_number_integer()) << k;
    }
  }
  EXPECT_EQ(doc["groups"][1]["user"], "bob");
  EXPECT_DOUBLE_EQ(doc["groups"][1]["gpu_hours"].get<double>(), 7.0);
  EXPECT_DOUBLE_EQ(doc["groups"][1]["extension_gpu_hours"].get<double>(), 3.0);
  EXPECT_EQ(doc["groups"][1]["rescales"], 4);
  EXPECT_EQ(doc["total"]["user"], "TOTAL");
  EXPECT_DOUBLE_EQ(doc["total"]["gpu_hours"].get<double>(), 11.0);
  Report nj = BuildReport(recs, nullptr, Day());
  auto doc2 = nlohmann::json::parse(RenderJson(nj));
  EXPECT_TRUE(doc2["groups"][0]["rescales"].is_null());
  EXPECT_TRUE(doc2["groups"][0]["time_saved_h"].is_null());
  EXPECT_FALSE(doc2["journal"].get<bool>());
}

TEST(ReportOutput, TableIsAligned) {
  auto recs = ParseSacct(SacctText()).value();
  Report r = BuildReport(recs, nullptr, Day());
  std::string t = RenderTable(r);
  std::istringstream in(t);
  std::string title, head, line;
  std::getline(in, title);
  EXPECT_EQ(title, "GPU usage 2026-11-20T00:00:00 .. 2026-11-21T00:00:00 by account (no journal: --db)");
  std::getline(in, head);
  EXPECT_EQ(head.rfind("ACCOUNT  JOBS", 0), 0u) << head;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u);  // bio chem physics, rule, TOTAL
  // Right-aligned numbers: every data line ends where the header ends.
  EXPECT_EQ(lines[0].size(), head.size());
  EXPECT_EQ(lines[1].size(), head.size());
  EXPECT_EQ(lines[4].rfind("TOTAL", 0), 0u);
  EXPECT_NE(lines[1].find(" 7.00 "), std::string::npos) << lines[1];
}

TEST(ReportOutput, ParsersRefuseUnknownValues) {
  EXPECT_EQ(ParseGroupBy("project").status().message(),
            "--by: unknown grouping 'project'; expected account, user, partition or job");
  EXPECT_EQ(ParseFormat("xml").status().message(), "--format: unknown format 'xml'; expected table, csv, json or html");
  EXPECT_EQ(ParseFormat("html").value(), Format::kHtml);
}

}  // namespace
}  // namespace elastic::report
