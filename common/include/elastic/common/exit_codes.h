// Exit statuses that cross component boundaries: the runtime sets them, the launcher passes them
// on, elasticd reads them from Slurm (docs/interfaces.md, "Exit codes").
#pragma once

namespace elastic {

// A training process stops because its world broke: a rank died or hangs (a collective failed
// or outlived ELASTIC_COLLECTIVE_TIMEOUT_S, a spawn/connect watchdog fired). EX_TEMPFAIL: the
// job's state is intact up to its last checkpoint; elasticd requeues a job whose batch script
// ends with it (recovery.restart_world_lost), and the program resumes from that checkpoint.
inline constexpr int kExitWorldLost = 75;

}  // namespace elastic
