// Strict INI files (elasticd.conf and other daemon configuration), read with
// Boost.Program_options: "[section]" headers, "key = value" lines, '#' comments.
#pragma once

#include <string>
#include <vector>

#include "elastic/common/config.h"
#include "elastic/common/error.h"

namespace elastic::config {

// Reads `path` and applies each "section.key" setting through `table` (keys are written
// "section.key" there). Refuses unknown sections or keys, keys given twice, and bad values
// (the table's parsers), naming the file, and for syntax errors the problem Boost found.
// kConfig on any error; kNotFound when the file cannot be opened.
Status LoadIniFile(const std::string& path, const std::vector<KeySpec>& table);

}  // namespace elastic::config
