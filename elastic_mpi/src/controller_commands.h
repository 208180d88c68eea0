// Commands to the runtime (internal header): what rank 0 reads from elasticd or a command
// directory, the decision it takes from them at a rescale point, and the step metrics it sends
// back. The handling itself (poll, decide, acknowledge) is Session::Impl's, in
// controller_commands.cpp; docs/interfaces.md section 3 is the protocol.
#pragma once

#include <cstdint>
#include <string>

#include "elastic/common/error.h"
#include "elastic_mpi/metrics.h"
#include "step_window.h"

namespace elastic::mpi {

class ControllerLink;

// The decision rank 0 takes at a rescale point, shared with every rank by one MAX-allreduce
// (rank 0 contributes the decision, the others zeros), so a step boundary costs one small
// collective.
enum class Action : std::int64_t { kNone = 0, kSpawn = 1, kShrink = 2, kAccept = 3, kBatch = 4, kRelaunch = 5 };
struct Decision {
  Action action = Action::kNone;
  std::int64_t count = 0;         // ranks to spawn; a relaunch: the new world's ranks
  std::int64_t group = 0;         // group that joins or leaves
  std::int64_t global_batch = 0;  // new global batch after the change (0: unchanged)
};

// A pending command from a command file or from elasticd (id > 0: acknowledge it).
struct Command {
  std::string action;  // grow, shrink, set_batch, cancel_grow, checkpoint, relaunch
  std::uint32_t group = 0;
  std::string token;
  std::uint64_t global_batch = 0;
  std::int64_t id = 0;  // elasticd's command id; 0 for command files
  // relaunch: the new world, [{"node": N, "ranks": R, "agent": [argv...]}, ...] as JSON text
  // (relaunch.h: the launcher's, passed through); world_ranks its ranks in all.
  std::string world;
  std::int64_t world_ranks = 0;
};

// Parses one command object; kProtocol when malformed.
Result<Command> ParseCommand(const std::string& text);

// Step metrics to elasticd, at most every `interval_s`: the median step time of the window
// (step_window.h); a world's first report comes once `interval_s` passed after its first step.
class ControllerSink final : public MetricsSink {
 public:
  ControllerSink(ControllerLink* link, double interval_s, double total_samples)
      : link_(link), interval_s_(interval_s), total_samples_(total_samples) {}
  void OnStep(const StepMetrics& m) noexcept override;
  void OnRescale(const std::string&, int, double) noexcept override;

 private:
  ControllerLink* link_;
  double interval_s_;
  double total_samples_;
  StepWindow window_;
};

}  // namespace elastic::mpi
