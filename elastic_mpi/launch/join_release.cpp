// elastic-join-release PORT GROUP TIMEOUT_S: the stand-in joiner of a running world's rank 0.
// A parent whose joiner never connects (killed between `ready` and connect, or its extension job
// cancelled) waits in MPI_Comm_accept, which Open MPI 4.1 cannot cancel: neither closing the port
// nor connecting to it from a thread of the accepting process itself releases it (both tried:
// both hang). This separate MPI singleton (started by the parent with the rendezvous of its job)
// connects to the port and sends a release record; the parent then refuses it, as it refuses a
// bad token, and trains on at its size. docs/runtime.md, "Deadlines of a grow".
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "elastic/common/exit_codes.h"
#include "elastic_mpi/join.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "Usage: elastic-join-release PORT GROUP TIMEOUT_S\n");
    return 2;
  }
  const std::string port = argv[1];
  const auto group = static_cast<std::uint32_t>(std::strtoul(argv[2], nullptr, 10));
  // The parent kills this process when its accept completes another way; alarm() bounds the rest.
  alarm(static_cast<unsigned>(std::max(1.0, std::strtod(argv[3], nullptr))));
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Comm inter = MPI_COMM_NULL;
  std::string name = port;
  if (MPI_Comm_connect(name.data(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter) != MPI_SUCCESS) {
    std::fprintf(stderr, "elastic-join-release: cannot connect to the accepting world\n");
    MPI_Finalize();
    return 1;
  }
  elastic::mpi::JoinRecord record = elastic::mpi::ReleaseRecord(group);
  int verdict = 0;
  MPI_Send(record.data(), 64, MPI_BYTE, 0, elastic::mpi::kTagJoinRecord, inter);
  MPI_Recv(&verdict, 1, MPI_INT, 0, elastic::mpi::kTagJoinVerdict, inter, MPI_STATUS_IGNORE);
  MPI_Comm_disconnect(&inter);
  MPI_Finalize();
  return 0;
}
