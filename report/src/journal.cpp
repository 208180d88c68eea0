#include "elastic/report/journal.h"

#include <sqlite3.h>

#include <functional>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "elastic/common/journal_schema.h"

namespace elastic::report {
namespace {

using Db = std::unique_ptr<sqlite3, int (*)(sqlite3*)>;

// Runs a query; `row` sees each result row. Returns the SQLite error text, or "" on success.
std::string Query(sqlite3* db, const char* sql, const std::function<void(sqlite3_stmt*)>& row) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) return sqlite3_errmsg(db);
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> guard(st, sqlite3_finalize);
  while (true) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      if (row) row(st);
      continue;
    }
    if (rc == SQLITE_DONE) return "";
    return sqlite3_errmsg(db);
  }
}

std::string Text(sqlite3_stmt* st, int col) {
  const unsigned char* t = sqlite3_column_text(st, col);
  if (t == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(t), static_cast<size_t>(sqlite3_column_bytes(st, col)));
}
uint64_t U64(sqlite3_stmt* st, int col) { return static_cast<uint64_t>(sqlite3_column_int64(st, col)); }
int Int(sqlite3_stmt* st, int col) { return sqlite3_column_int(st, col); }
double Real(sqlite3_stmt* st, int col) {
  return sqlite3_column_type(st, col) == SQLITE_NULL ? 0.0 : sqlite3_column_double(st, col);
}

}  // namespace

Result<Journal> ReadJournal(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  Db db(raw, sqlite3_close);
  if (rc != SQLITE_OK) {
    std::string msg = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    return Status(ErrorKind::kUnavailable, "cannot open the state database " + path + ": " + msg);
  }
  sqlite3_busy_timeout(db.get(), 5000);
  auto fail = [&](const std::string& err) {
    return Status(ErrorKind::kUnavailable, "cannot read the state database " + path + ": " + err);
  };
  // One read transaction: a consistent snapshot while elasticd keeps writing (WAL).
  if (std::string e = Query(db.get(), "BEGIN", nullptr); !e.empty()) return fail(e);
  std::set<std::string> tables;
  if (std::string e = Query(db.get(), "SELECT name FROM sqlite_master WHERE type = 'table'",
                            [&](sqlite3_stmt* st) { tables.insert(Text(st, 0)); });
      !e.empty()) {
    return fail(e);
  }
  for (const char* t : journal::kReportTables) {
    if (!tables.count(t)) {
      return Status(ErrorKind::kInvalidArgument,
                    path + " is not an elasticd state database (it has no table '" + std::string(t) + "')");
    }
  }
  Journal j;
  std::string e = Query(db.get(), journal::kReadJobs,
                        [&](sqlite3_stmt* st) {
                          JournalJob job;
                          job.id = U64(st, 0);
                          job.user = Text(st, 1);
                          job.account = Text(st, 2);
                          job.state = Text(st, 3);
                          job.registered_at = Real(st, 4);
                          job.ended_at = Real(st, 5);
                          try {
                            auto d = nlohmann::json::parse(Text(st, 6));
                            job.partition = d.value("partition", "");
                            job.gpu_type = d.value("gpu_type", "");
                            job.base_gpus = d.value("base_gpus", 0);
                            for (const auto& s : d.value("samples", nlohmann::json::array())) {
                              // [nodes, gpus, local_batch, step_time]
                              StepSample sample{s.at(1).get<int>(), s.at(2).get<double>(), s.at(3).get<double>()};
                              if (sample.gpus > 0 && sample.step_time_s > 0 && sample.local_batch > 0) {
                                job.samples.push_back(sample);
                              }
                            }
                          } catch (const std::exception& ex) {
                            j.warnings.push_back("state database: job " + std::to_string(job.id) +
                                                 " has an unreadable data record (" + ex.what() +
                                                 "): no base size or step times from the journal");
                          }
                          j.jobs[job.id] = std::move(job);
                        });
  if (!e.empty()) return fail(e);
  e = Query(db.get(), journal::kReadIntervals, [&](sqlite3_stmt* st) {
    j.intervals.push_back({U64(st, 0), Real(st, 1), Real(st, 2), Int(st, 3)});
  });
  if (!e.empty()) return fail(e);
  e = Query(db.get(), journal::kReadRescales,
            [&](sqlite3_stmt* st) {
              Rescale r;
              r.job = U64(st, 0);
              r.kind = Text(st, 1);
              r.group = sqlite3_column_int64(st, 2);
              r.from_gpus = Int(st, 3);
              r.to_gpus = Int(st, 4);
              r.requested_at = Real(st, 5);
              r.done_at = Real(st, 6);
              r.ok = sqlite3_column_type(st, 7) != SQLITE_NULL && Int(st, 7) != 0;
              r.pause_s = Real(st, 8);
              j.rescales.push_back(std::move(r));
            });
  if (!e.empty()) return fail(e);
  e = Query(db.get(), journal::kReadExtensions,
            [&](sqlite3_stmt* st) {
              j.extensions.push_back({U64(st, 0), sqlite3_column_int64(st, 1), U64(st, 2), Int(st, 3), Text(st, 4)});
            });
  if (!e.empty()) return fail(e);
  if (tables.count("trials")) {
    e = Query(db.get(), journal::kReadTrials, [&](sqlite3_stmt* st) {
      j.trials.push_back({U64(st, 0), static_cast<uint32_t>(U64(st, 1)), U64(st, 2), sqlite3_column_int64(st, 3),
                          Text(st, 4), Text(st, 5)});
    });
    if (!e.empty()) return fail(e);
  }
  Query(db.get(), "COMMIT", nullptr);
  return j;
}

}  // namespace elastic::report
