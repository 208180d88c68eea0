#include "db.h"

#include <memory>

namespace elastic::controller {
namespace {

const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '1');

-- Elastic jobs, registered when their batch step starts. data: the job record as JSON.
CREATE TABLE IF NOT EXISTS jobs (
  job_id INTEGER PRIMARY KEY,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  account TEXT NOT NULL,
  state TEXT NOT NULL,            -- running | ended
  registered_at REAL NOT NULL,
  ended_at REAL,
  data TEXT NOT NULL);

-- Extension jobs: one node group each. The row exists before the Slurm job does (intent),
-- so that a restart after a crash can adopt or cancel what was submitted.
CREATE TABLE IF NOT EXISTS extensions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  parent INTEGER NOT NULL,
  grp INTEGER NOT NULL,
  slurm_job INTEGER,              -- NULL until slurmctld accepted the job
  node TEXT NOT NULL,
  gpu_type TEXT NOT NULL,
  gpus INTEGER NOT NULL,
  account TEXT NOT NULL,
  token TEXT NOT NULL,
  state TEXT NOT NULL,            -- submitting submitted registered ready joining joined leaving left failed cancelled
  created_at REAL NOT NULL,
  joined_at REAL,
  ended_at REAL,
  reason TEXT,
  UNIQUE (parent, grp));

-- Commands for a job's runtime, delivered by poll and acknowledged once.
CREATE TABLE IF NOT EXISTS commands (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  body TEXT NOT NULL,
  state TEXT NOT NULL,            -- queued delivered acked failed cancelled
  created_at REAL NOT NULL,
  done_at REAL,
  result TEXT);

-- One row per scheduling epoch: what the optimizer saw and decided, and what was done.
CREATE TABLE IF NOT EXISTS epochs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at REAL NOT NULL,
  duration_ms REAL NOT NULL,
  policy TEXT NOT NULL,
  jobs INTEGER NOT NULL,
  objective REAL,
  inputs TEXT NOT NULL,
  decisions TEXT NOT NULL);

-- Every rescale with the time of each phase (seconds), as the runtime reported them.
CREATE TABLE IF NOT EXISTS rescales (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  kind TEXT NOT NULL,             -- grow | shrink
  grp INTEGER NOT NULL,
  from_gpus INTEGER NOT NULL,
  to_gpus INTEGER NOT NULL,
  requested_at REAL NOT NULL,
  done_at REAL,
  ok INTEGER,
  pause_s REAL,
  phases TEXT);

-- GPU-count intervals per elastic job (end NULL: still open).
CREATE TABLE IF NOT EXISTS intervals (
  job_id INTEGER NOT NULL,
  start REAL NOT NULL,
  end REAL,
  gpus INTEGER NOT NULL,
  gpu_type TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS intervals_job ON intervals (job_id);

-- Every action taken on a user's job, and who asked for it.
CREATE TABLE IF NOT EXISTS audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at REAL NOT NULL,
  actor_uid INTEGER,
  action TEXT NOT NULL,
  job_id INTEGER,
  detail TEXT NOT NULL);
)sql";

}  // namespace

Result<std::unique_ptr<Database>> Database::Open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if (db) sqlite3_close(db);
    return Status(ErrorKind::kUnavailable, "cannot open the state database " + path + ": " + msg);
  }
  std::unique_ptr<Database> d(new Database(db));
  try {
    sqlite3_busy_timeout(db, 5000);
    d->Run("PRAGMA journal_mode=WAL");
    d->Run("PRAGMA synchronous=NORMAL");
    d->Run("PRAGMA foreign_keys=ON");
    char* err = nullptr;
    if (sqlite3_exec(db, kSchema, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return Status(ErrorKind::kUnavailable, "cannot create the schema in " + path + ": " + msg);
    }
  } catch (const Error& e) {
    return Status(ErrorKind::kUnavailable, std::string("state database ") + path + ": " + e.what());
  }
  return d;
}

Database::~Database() { sqlite3_close(db_); }

void Database::Run(const std::string& sql, const std::vector<SqlValue>& params,
                   const std::function<void(sqlite3_stmt*)>& row) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    throw Error(ErrorKind::kInternal, std::string("SQL prepare: ") + sqlite3_errmsg(db_) + " in: " + sql);
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> guard(st, sqlite3_finalize);
  for (size_t i = 0; i < params.size(); ++i) {
    int idx = static_cast<int>(i) + 1;
    const SqlValue& v = params[i];
    if (std::holds_alternative<std::nullptr_t>(v)) {
      sqlite3_bind_null(st, idx);
    } else if (auto* n = std::get_if<int64_t>(&v)) {
      sqlite3_bind_int64(st, idx, *n);
    } else if (auto* d = std::get_if<double>(&v)) {
      sqlite3_bind_double(st, idx, *d);
    } else {
      const auto& s = std::get<std::string>(v);
      sqlite3_bind_text(st, idx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    }
  }
  while (true) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      if (row) row(st);
      continue;
    }
    if (rc == SQLITE_DONE) break;
    throw Error(ErrorKind::kInternal, std::string("SQL step: ") + sqlite3_errmsg(db_) + " in: " + sql);
  }
}

int64_t Database::LastInsertId() const { return sqlite3_last_insert_rowid(db_); }

void Database::Transaction(const std::function<void()>& body) {
  Run("BEGIN IMMEDIATE");
  try {
    body();
  } catch (...) {
    Run("ROLLBACK");
    throw;
  }
  Run("COMMIT");
}

int64_t Database::Int(sqlite3_stmt* st, int col) { return sqlite3_column_int64(st, col); }
double Database::Real(sqlite3_stmt* st, int col) { return sqlite3_column_double(st, col); }
std::string Database::Text(sqlite3_stmt* st, int col) {
  const unsigned char* t = sqlite3_column_text(st, col);
  return t ? std::string(reinterpret_cast<const char*>(t), static_cast<size_t>(sqlite3_column_bytes(st, col))) : "";
}

}  // namespace elastic::controller
