// elasticd's state in SQLite (WAL): registered jobs, extensions, commands, epochs, rescales,
// GPU-count intervals (the source of usage reports) and the audit log. This is the connection;
// the tables are in elastic/common/journal_schema.h (shared with report/, which reads them) and
// the statements elasticd runs in db_records.h.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::controller {

using SqlValue = std::variant<std::nullptr_t, int64_t, double, std::string>;

class Database {
 public:
  // Opens (creating if needed) the database at `path`, in WAL mode, and creates the schema.
  static Result<std::unique_ptr<Database>> Open(const std::string& path);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one statement with positional parameters; `row` is called for each result row.
  // Throws elastic::Error(kInternal) on SQL errors (they are bugs or a broken disk).
  void Run(const std::string& sql, const std::vector<SqlValue>& params = {},
           const std::function<void(sqlite3_stmt*)>& row = nullptr);
  int64_t LastInsertId() const;
  // Runs `body` in one transaction (rolled back if it throws).
  void Transaction(const std::function<void()>& body);

  // Helpers for result columns.
  static int64_t Int(sqlite3_stmt* st, int col);
  static double Real(sqlite3_stmt* st, int col);
  static std::string Text(sqlite3_stmt* st, int col);

 private:
  explicit Database(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

}  // namespace elastic::controller
