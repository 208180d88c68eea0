#include "db.h"

#include <memory>

#include "elastic/common/journal_schema.h"

namespace elastic::controller {

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
    if (sqlite3_exec(db, journal::kSchema, nullptr, nullptr, &err) != SQLITE_OK) {
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
