// Renderings of a Report: aligned table, CSV, JSON and a self-contained HTML page.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "elastic/common/error.h"
#include "elastic/report/report.h"

namespace elastic::report {

enum class Format { kTable, kCsv, kJson, kHtml };
Result<Format> ParseFormat(std::string_view text);

// The column names of CSV and the keys of each JSON group, in order (the first one is the
// grouping's name: account, user, partition or job).
std::vector<std::string> ColumnNames(GroupBy by);

std::string RenderTable(const Report& report);
std::string RenderCsv(const Report& report);
std::string RenderJson(const Report& report);
// `timeline`: the job chart (--job); without it the page says how to get one.
std::string RenderHtml(const Report& report, const std::optional<JobTimeline>& timeline);

}  // namespace elastic::report
