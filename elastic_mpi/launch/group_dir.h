// The group directory (<run dir>/group.<launcher pid>, mode 700) of a node group whose ranks the
// launcher does not start itself: under Open MPI 5 they are children of the job's PRRTE DVM
// (src/mpi_stack.h), which neither carries the launcher's environment to them nor forwards
// signals to them (a SIGTERM to `mpirun --dvm` aborts the DVM and leaves the ranks running). The
// launcher writes its environment there; the rank shim (torch_env.h) adopts it and records the
// rank's pid there (PID@HOST); the launcher signals the ranks on its own host through those pids.
#pragma once

#include <string>
#include <vector>

namespace elastic::launch {

// Launcher: creates dir and writes the environment the ranks are to have: this process's own,
// changed by `changes` ("NAME=VALUE" sets, "NAME" alone unsets) and without Slurm's step id (as
// the ranks the launcher starts itself). False (errno set) when it cannot.
bool WriteGroupDir(const std::string& dir, const std::vector<std::string>& changes);

// Rank shim: replaces this process's environment by the group's, keeping what the DVM set for
// the rank itself (PMIX_* and PRTE_*, never the launcher's; OMPI_* the group does not set), and on another host than
// the launcher's (a relaunched world's ranks there) what belongs to its own node: SLURM_*, the
// devices (CUDA_VISIBLE_DEVICES and its kin), TMPDIR, HOSTNAME, as it has them or not at all.
// Records this process's pid. False when the group's environment cannot be read.
bool AdoptGroupDir(const std::string& dir);

// Launcher: sends sig to every rank of this host that recorded its pid in dir.
void SignalGroup(const std::string& dir, int sig);

// Launcher: removes the directory and its files.
void RemoveGroupDir(const std::string& dir);

}  // namespace elastic::launch
