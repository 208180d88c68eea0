// JSON forms of snapshots and plans (schema: docs/optimizer.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "elastic/common/error.h"
#include "elastic/optimizer/model.h"

namespace elastic::optimizer {

// Parses a snapshot. Unknown keys, wrong types and out-of-range values are kInvalidArgument
// errors whose message names the JSON path (e.g. "jobs[3].options[0].gpus: expected an
// integer"). The result is also checked with Validate().
Result<Snapshot> SnapshotFromJson(const nlohmann::json& json);
// Reads and parses a file ("-" is standard input); kNotFound when it cannot be opened.
Result<Snapshot> LoadSnapshot(const std::string& path);

nlohmann::json SnapshotToJson(const Snapshot& snapshot);
nlohmann::json PlanToJson(const Plan& plan);

}  // namespace elastic::optimizer
