// Exit statuses of the project's programs, in one place. 0, 1 and 2 mean the same in every
// program; the numbers above are each program's own and several reuse a number with another
// meaning (3: bad input, controller unreachable, check failed), as they did before they were
// gathered here: each program's --help and manual list its own. The ones that cross component
// boundaries (the runtime sets them, the launcher passes them on, elasticd reads them from Slurm)
// are in docs/interfaces.md, "Exit codes".
#pragma once

namespace elastic {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // an error: a source, the output, an internal step failed
inline constexpr int kExitUsage = 2;    // bad command line

// elastic-optimize, elastic-sim: the input file is missing or malformed.
inline constexpr int kExitBadInput = 3;
// elasticctl: the controller cannot be reached; it refused the request.
inline constexpr int kExitUnreachable = 3;
inline constexpr int kExitRefused = 4;
// elastic-train-logreg: the trained model failed its check.
inline constexpr int kExitCheckFailed = 3;

// elastic-launch: the rendezvous (ompi-server, the parent world) failed (EX_UNAVAILABLE); the
// ranks could not be started (EX_OSERR).
inline constexpr int kExitRendezvous = 69;
inline constexpr int kExitLaunch = 71;

// A training process stops because its world broke: a rank died or hangs (a collective failed
// or outlived ELASTIC_COLLECTIVE_TIMEOUT_S, a spawn/connect watchdog fired). EX_TEMPFAIL: the
// job's state is intact up to its last checkpoint; elasticd requeues a job whose batch script
// ends with it (recovery.restart_world_lost), and the program resumes from that checkpoint.
inline constexpr int kExitWorldLost = 75;
// A joining group was refused by the running world (bad token, EX_NOPERM): the extension fails.
inline constexpr int kExitJoinRefused = 77;

}  // namespace elastic
