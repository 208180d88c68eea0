// A session directory of a launch's own for an Open MPI or PRRTE process (the rendezvous server, a
// group's mpirun), used by both MPI stack adapters. By default such a process makes its session
// directory under /tmp, named by host and user (Open MPI 4: /tmp/ompi.HOST.UID) or host and pid
// (PRRTE): two of a user's processes that start at the same moment race to create the shared one
// (Open MPI 4's ompi-server then fails: "mkdir /tmp/ompi.HOST.UID: File exists"), and one left by
// a killed process makes a later one with the same pid fail (pid namespaces make that likely).
#pragma once

#include <string>

namespace elastic::mpi::stack {

// A new private directory under $TMPDIR (or /tmp) named PREFIX.XXXXXX; "" when none can be made
// (the process then uses its default).
std::string NewSessionDir(const char* prefix);

// Removes `dir` and what the process left under it (depth first, no link followed).
void RemoveSessionDir(const std::string& dir);

}  // namespace elastic::mpi::stack
