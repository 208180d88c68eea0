#include "csv.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace elastic::simulator::csv {

int Table::Column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

Result<Table> Parse(const std::string& text, const std::string& path, char sep) {
  Table t;
  t.path = path;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> fields = Split(line, sep);
    if (t.header.empty()) {
      t.header = std::move(fields);
      continue;
    }
    if (fields.size() != t.header.size()) {
      return Status(ErrorKind::kInvalidArgument, path + ":" + std::to_string(n) + ": expected " +
                                                     std::to_string(t.header.size()) + " fields, got " +
                                                     std::to_string(fields.size()));
    }
    t.rows.push_back(std::move(fields));
    t.line.push_back(n);
  }
  if (t.header.empty()) return Status(ErrorKind::kInvalidArgument, path + ": empty file (no header line)");
  return t;
}

Result<Table> Read(const std::string& path, char sep) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorKind::kNotFound, path + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return Parse(ss.str(), path, sep);
}

std::string Where(const Table& t, size_t row, const std::string& column) {
  return t.path + ":" + std::to_string(t.line[row]) + ": column " + column;
}

Result<double> Number(const Table& t, size_t row, int col) {
  const std::string& s = t.rows[row][static_cast<size_t>(col)];
  const std::string& name = t.header[static_cast<size_t>(col)];
  if (!s.empty()) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &end);
    if (errno == 0 && end == s.c_str() + s.size() && std::isfinite(v)) return v;
  }
  return Status(ErrorKind::kInvalidArgument, Where(t, row, name) + ": expected a number, got '" + s + "'");
}

Result<int64_t> Integer(const Table& t, size_t row, int col) {
  const std::string& s = t.rows[row][static_cast<size_t>(col)];
  const std::string& name = t.header[static_cast<size_t>(col)];
  if (!s.empty()) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == 0 && end == s.c_str() + s.size()) return static_cast<int64_t>(v);
  }
  return Status(ErrorKind::kInvalidArgument, Where(t, row, name) + ": expected an integer, got '" + s + "'");
}

}  // namespace elastic::simulator::csv
