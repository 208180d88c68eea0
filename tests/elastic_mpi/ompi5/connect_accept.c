/* Minimal reproducer of the rendezvous between two separately launched MPI jobs, as the runtime
 * does it (src/rendezvous.cpp): the accepting side opens a port and publishes it under a
 * service name; the connecting side looks the name up (polling), connects; both merge and check
 * an allreduce (the sum of 1 + rank over the merged world). Every step is timed on stderr.
 *   connect_accept accept SERVICE      (every rank of the accepting job)
 *   connect_accept connect SERVICE     (every rank of the connecting job)
 * Exit status 0: merged, the allreduce right; 1: an MPI call failed; 2: usage; a hang is cut by
 * the caller's timeout (repro.sh). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "accept") != 0 && strcmp(argv[1], "connect") != 0)) {
    fprintf(stderr, "usage: connect_accept accept|connect SERVICE\n");
    return 2;
  }
  const int accepting = strcmp(argv[1], "accept") == 0;
  const char* service = argv[2];
  const double t0 = now();
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, rc = MPI_SUCCESS;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char port[MPI_MAX_PORT_NAME] = {0};
  MPI_Comm inter = MPI_COMM_NULL, merged = MPI_COMM_NULL;
  if (accepting) {
    if (rank == 0) {
      rc = MPI_Open_port(MPI_INFO_NULL, port);
      if (rc == MPI_SUCCESS) rc = MPI_Publish_name(service, MPI_INFO_NULL, port);
      fprintf(stderr, "[%s %d] %.3f s: open+publish %s: %d\n", argv[1], rank, now() - t0, service, rc);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) goto failed;
    rc = MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
  } else {
    if (rank == 0) {
      rc = MPI_ERR_NAME;
      for (int i = 0; i < 100 && rc != MPI_SUCCESS; ++i) {  /* 10 s */
        rc = MPI_Lookup_name(service, MPI_INFO_NULL, port);
        if (rc != MPI_SUCCESS) usleep(100000);
      }
      fprintf(stderr, "[%s %d] %.3f s: lookup %s: %d\n", argv[1], rank, now() - t0, service, rc);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) goto failed;
    MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
  }
  fprintf(stderr, "[%s %d] %.3f s: %s: %d\n", argv[1], rank, now() - t0, argv[1], rc);
  if (rc != MPI_SUCCESS) goto failed;
  rc = MPI_Intercomm_merge(inter, accepting ? 0 : 1, &merged);
  if (rc != MPI_SUCCESS) goto failed;
  int size = 0, mine = 0, sum = 0;
  MPI_Comm_size(merged, &size);
  MPI_Comm_rank(merged, &mine);
  const int one = 1 + mine;
  rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
  fprintf(stderr, "[%s %d] %.3f s: merged world of %d, allreduce %d (expected %d)\n", argv[1], rank, now() - t0,
          size, sum, size * (size + 1) / 2);
  if (rc != MPI_SUCCESS || sum != size * (size + 1) / 2) goto failed;
  MPI_Comm_free(&merged);
  MPI_Comm_disconnect(&inter);
  if (accepting && rank == 0) {
    MPI_Unpublish_name(service, MPI_INFO_NULL, port);
    MPI_Close_port(port);
  }
  MPI_Finalize();
  return 0;
failed:
  fprintf(stderr, "[%s %d] failed with MPI error %d\n", argv[1], rank, rc);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}
