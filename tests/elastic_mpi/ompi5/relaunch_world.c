/* relaunch_world: one world of a relaunch (relaunch.sh). Rank 0 reads the state the previous world
 * left in memory-backed storage (STATE_IN, if set) and broadcasts it to every rank; the world checks
 * an allreduce and counts its distinct hosts; rank 0 writes STATE_MB MiB of state for the next world
 * (STATE_OUT, if set). Prints one line on rank 0:
 *   world N sum S expected E hosts H state_in_mib M state_s T init_s I state_bad B
 * (B: ranks whose copy of the state differs from what the previous world wrote).
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  double t0 = now();
  MPI_Init(&argc, &argv);
  double init_s = now() - t0;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* The state: rank 0 reads it, every rank receives it. */
  const char* in = getenv("STATE_IN");
  long bytes = 0;
  char* state = NULL;
  double t1 = now();
  if (rank == 0 && in != NULL && *in != '\0') {
    FILE* f = fopen(in, "rb");
    if (f != NULL) {
      if (fseek(f, 0, SEEK_END) == 0) bytes = ftell(f);
      if (bytes > INT_MAX) bytes = -1;  /* one MPI_Bcast of int count (relaunch.sh keeps STATE_MB < 2048) */
      if (bytes > 0 && fseek(f, 0, SEEK_SET) == 0) state = malloc((size_t)bytes);
      if (bytes > 0 && (state == NULL || fread(state, 1, (size_t)bytes, f) != (size_t)bytes)) bytes = -1;
      fclose(f);
    }
  }
  MPI_Bcast(&bytes, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  long bad = 0; /* receivers whose copy is not the 7s rank 0 wrote */
  if (bytes > 0) {
    if (rank != 0) state = malloc((size_t)bytes);
    if (state == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Bcast(state, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    long mine_bad = 0;
    for (long i = 0; i < bytes; ++i) mine_bad |= state[i] != 7;
    MPI_Reduce(&mine_bad, &bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  }
  double state_s = now() - t1;

  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  char* all = rank == 0 ? calloc((size_t)size, sizeof host) : NULL;
  MPI_Gather(host, sizeof host, MPI_CHAR, all, sizeof host, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    int hosts = 0;
    for (int i = 0; i < size; ++i) {
      int seen = 0;
      for (int j = 0; j < i; ++j) seen |= strcmp(all + (size_t)i * sizeof host, all + (size_t)j * sizeof host) == 0;
      hosts += !seen;
    }
    const char* out = getenv("STATE_OUT");
    const char* mb = getenv("STATE_MB");
    if (out != NULL && *out != '\0' && mb != NULL) {
      size_t n = (size_t)atol(mb) << 20;
      char* next = malloc(n);
      FILE* f = next != NULL ? fopen(out, "wb") : NULL;
      if (f != NULL) {
        memset(next, 7, n);
        if (fwrite(next, 1, n, f) != n) fprintf(stderr, "relaunch_world: writing %s failed\n", out);
        if (fclose(f) != 0) fprintf(stderr, "relaunch_world: closing %s failed\n", out);
      }
      free(next);
    }
    printf("world %d sum %ld expected %ld hosts %d state_in_mib %.1f state_s %.3f init_s %.3f state_bad %ld\n",
           size, sum, (long)size * (size + 1) / 2, hosts, bytes > 0 ? (double)bytes / 1048576.0 : 0.0, state_s,
           init_s, bad);
    fflush(stdout);
  }
  free(state);
  free(all);
  MPI_Finalize();
  return 0;
}
