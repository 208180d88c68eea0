// A minimal delimited-text reader for the simulator's inputs (no quoting: none of the input
// formats quote fields). Errors name "FILE:LINE".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::simulator::csv {

struct Table {
  std::string path;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> line;  // source line number of each row (1-based)

  // Index of a header column, or -1.
  int Column(const std::string& name) const;
};

// Reads `path` split on `sep`; the first non-empty line is the header. Every row must have as
// many fields as the header ("PATH:LINE: expected N fields, got M"). Blank lines are skipped,
// a trailing '\r' is removed.
Result<Table> Read(const std::string& path, char sep = ',');
// The same on text already in memory (`path` only names it in messages).
Result<Table> Parse(const std::string& text, const std::string& path, char sep = ',');

// "PATH:LINE: column NAME: MESSAGE"
std::string Where(const Table& t, size_t row, const std::string& column);

// Strict number parsing of a whole field: kInvalidArgument "PATH:LINE: column NAME: expected a
// number, got 'x'".
Result<double> Number(const Table& t, size_t row, int col);
Result<int64_t> Integer(const Table& t, size_t row, int col);

std::vector<std::string> Split(const std::string& s, char sep);

}  // namespace elastic::simulator::csv
