// Jobs across GPU types (--elastic-gpu-types): what elasticd knows of a job's speed on each type
// it accepts, and the rule that decides whether moving it to another type pays back the move.
// A job runs on one type at a time; a move is a checkpoint, a requeue and a restart at its base
// size on the new type (Controller's moves.cpp carries it out). The rules are explained in
// docs/admin-guide.md ("Jobs across GPU types").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config.h"
#include "registry.h"
#include "slurm_adapter.h"

namespace elastic::controller {

// The job's training speed per GPU at its base size on its current type (samples per second per
// GPU): the mean over its step-time samples at the base GPU count. nullopt before one.
std::optional<double> MeasuredSpeedPerGpu(const ElasticJob& job);

// The job's speed per GPU on `type`: measured there (ElasticJob::type_speed, or its samples on
// its current type), else bootstrapped from a type where it was measured by the site's relative
// speeds (types.speed; 1.0 for a type the table does not name). nullopt when it was measured
// nowhere.
std::optional<double> SpeedPerGpu(const ElasticJob& job, const std::string& type, const ControllerConfig& config);

// The types the job accepts besides the one it runs on (spec gpu_types, in the order given).
std::vector<std::string> OtherTypes(const ElasticJob& job);

// Whether moving the job from its current type to `to` at its base size pays back: with L the
// job's training left at its current size and speed (its remaining samples at its last step's
// speed) and L' the same samples at its base size on `to` (SpeedPerGpu x base GPUs), the move
// saves L - L' and costs cost_s (checkpoint, requeue, restart); it pays back when
// L - L' > cost_s x payback. nullopt when L or L' is unknown (no training goal, no speed).
struct MoveCheck {
  double left_s = 0;      // L
  double left_new_s = 0;  // L'
  double cost_s = 0;
  double payback = 0;
  bool worth = false;
  nlohmann::json ToJson() const;
};
std::optional<MoveCheck> CheckMove(const ElasticJob& job, const std::string& to, double cost_s, double payback,
                                   const ControllerConfig& config, double now);

// The job starts on a new type: its step-time samples and fit on `from` are kept apart (they
// describe that type), and those it had on `to` before, if any, come back. The speed it measured
// on `from` stays in type_speed.
void SwitchTypeSamples(ElasticJob& job, const std::string& from, const std::string& to);

// The usable nodes without GPUs of `type`, comma-separated: the nodes a moved job is kept from.
std::string NodesWithout(const std::vector<NodeInfo>& nodes, const std::string& type);

}  // namespace elastic::controller
