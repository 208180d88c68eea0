/* A minimal training loop over the C API: sums a counter across the world at each step and
 * follows whatever schedule the environment sets. Shows the call order for bindings. */
#include <stdio.h>

#include "elastic_mpi/elastic_mpi.h"

int main(void) {
  elastic_session* session = NULL;
  if (elastic_session_create(32, &session) != ELASTIC_OK) {
    fprintf(stderr, "elastic-c-api-example: %s\n", elastic_last_error());
    return 1;
  }
  double steps_done = 0;
  elastic_session_register(session, "steps", &steps_done, sizeof steps_done);
  if (elastic_session_begin(session) != ELASTIC_OK) {
    fprintf(stderr, "elastic-c-api-example: %s\n", elastic_last_error());
    elastic_session_destroy(session);
    return 1;
  }
  if (elastic_session_allreduce_double_in(session, &steps_done, 1, 7) != ELASTIC_EINVAL) {
    fprintf(stderr, "elastic-c-api-example: an unknown memory space was accepted\n");
    elastic_session_destroy(session);
    return 3;
  }
  for (int i = 0; i < 20; ++i) {
    int changed = 0;
    int left = 0;
    if (elastic_session_rescale_point(session, &changed, &left) != ELASTIC_OK) break;
    if (left) break;
    double one = 1.0;
    /* ELASTIC_MEMORY_ANY asks CUDA where the buffer lives (here: host memory, through MPI even
     * when the world runs NCCL); a program that knows says ELASTIC_MEMORY_HOST or _DEVICE. */
    if (elastic_session_allreduce_double_in(session, &one, 1, ELASTIC_MEMORY_ANY) != ELASTIC_OK) {
      fprintf(stderr, "elastic-c-api-example: %s\n", elastic_last_error());
      elastic_session_destroy(session);
      return 3;
    }
    steps_done += 1;
    elastic_session_report_step(session, 0.0, elastic_session_global_batch(session));
    if (elastic_session_rank(session) == 0 && one != (double)elastic_session_size(session)) {
      fprintf(stderr, "elastic-c-api-example: allreduce gave %g for %d ranks\n", one, elastic_session_size(session));
      elastic_session_destroy(session);
      return 3;
    }
  }
  if (elastic_session_rank(session) == 0) printf("steps %g world %d\n", steps_done, elastic_session_size(session));
  elastic_session_destroy(session);
  return 0;
}
