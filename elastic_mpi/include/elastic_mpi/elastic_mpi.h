/* C API of the elastic_mpi runtime, for programs in C and bindings in other languages.
 *
 * Memory: every buffer has a memory space. The functions without one take host memory; the
 * ones with an `int memory` argument take ELASTIC_MEMORY_HOST, ELASTIC_MEMORY_DEVICE (CUDA
 * device memory) or ELASTIC_MEMORY_ANY (asked of CUDA per call with cudaPointerGetAttributes).
 * Device buffers go to NCCL when the world runs it, through a host copy over MPI otherwise;
 * host buffers always go through MPI. Device data must be complete when a call starts (the
 * stream that wrote it synchronized) and is complete when it returns.
 *
 * Every function returns 0 on success or a negative error code (ELASTIC_E*); the text of the
 * last error of the calling thread is available from elastic_last_error(). No C++ exception
 * crosses this boundary. Handles are owned by the caller and released with the matching
 * destroy function. Units: seconds for times, samples for batches, bytes for sizes.
 */
#ifndef ELASTIC_MPI_ELASTIC_MPI_H_
#define ELASTIC_MPI_ELASTIC_MPI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes (the negated common/ error kinds). */
enum {
  ELASTIC_OK = 0,
  ELASTIC_EINVAL = -1,       /* invalid argument */
  ELASTIC_ECONFIG = -2,      /* bad ELASTIC_* configuration */
  ELASTIC_EUNAVAILABLE = -3, /* MPI / a peer failed */
  ELASTIC_EPERM = -4,        /* join refused (bad token) */
  ELASTIC_ENOTFOUND = -5,
  ELASTIC_ETIMEOUT = -6,
  ELASTIC_EPROTOCOL = -7,
  ELASTIC_EINTERNAL = -8
};

/* Memory spaces of buffers. */
enum {
  ELASTIC_MEMORY_HOST = 0,
  ELASTIC_MEMORY_DEVICE = 1,
  ELASTIC_MEMORY_ANY = 2
};

/* Exit status for a program whose world broke (a call returned ELASTIC_EUNAVAILABLE): elasticd
 * requeues a job whose batch script ends with it, and the job resumes from its last checkpoint. */
#define ELASTIC_EXIT_WORLD_LOST 75

typedef struct elastic_session elastic_session; /* opaque */

/* Text of the calling thread's last error ("" when none). Valid until the next call. */
const char* elastic_last_error(void);

/* Creates a session from the ELASTIC_* environment; global_batch (> 0) is the program's initial
 * global batch, used unless the environment's schedule or the controller changes it. Initialises
 * MPI when needed. *out receives the handle (owned by the caller). */
int elastic_session_create(uint64_t global_batch, elastic_session** out);
/* Frees the session (and finalises MPI when the session initialised it). NULL is ignored. */
void elastic_session_destroy(elastic_session* session);

/* Registers a buffer of state handed over to newcomers (before elastic_session_begin). The
 * buffer stays owned by the caller and must stay valid for the session's lifetime. */
int elastic_session_register(elastic_session* session, const char* name, void* data, size_t bytes);
/* The same for a buffer in memory space `memory` (a device buffer is handed over and
 * checkpointed through a host copy). */
int elastic_session_register_in(elastic_session* session, const char* name, void* data, size_t bytes, int memory);
/* Collective: finishes start-up (newcomers receive state here). */
int elastic_session_begin(elastic_session* session);
/* Collective: rescale point at a step boundary. *changed = 1 when world or batch changed;
 * *left = 1 when this rank's group left (stop training, destroy the session). */
int elastic_session_rescale_point(elastic_session* session, int* changed, int* left);

int elastic_session_rank(const elastic_session* session);
int elastic_session_size(const elastic_session* session);
uint64_t elastic_session_global_batch(const elastic_session* session);
uint64_t elastic_session_local_batch(const elastic_session* session);
/* Learning-rate factor of the configured rule at the current batch (1 on error). */
double elastic_session_lr_factor(const elastic_session* session);

/* Collective: in-place sum over the world of count doubles / floats (host memory). */
int elastic_session_allreduce_double(elastic_session* session, double* data, size_t count);
int elastic_session_allreduce_float(elastic_session* session, float* data, size_t count);
/* The same for buffers in memory space `memory`. */
int elastic_session_allreduce_double_in(elastic_session* session, double* data, size_t count, int memory);
int elastic_session_allreduce_float_in(elastic_session* session, float* data, size_t count, int memory);
/* Collective: root's bytes into every rank's buffer, in memory space `memory`. */
int elastic_session_broadcast(elastic_session* session, void* data, size_t bytes, int root, int memory);
/* The world's collective backend after elastic_session_begin: "mpi" or "nccl" ("" before), and
 * the memory space its buffers are fast in (ELASTIC_MEMORY_HOST or ELASTIC_MEMORY_DEVICE). */
const char* elastic_session_backend_name(const elastic_session* session);
int elastic_session_memory_space(const elastic_session* session);
/* Collective: gradient-noise statistics from this rank's mean gradient (local_count samples)
 * and the world's mean gradient, both of length count. */
int elastic_session_observe_gradients(elastic_session* session, const double* local_mean,
                                      uint64_t local_count, const double* global_mean, size_t count);
/* Smoothed statistics (0 while unknown). */
double elastic_session_grad_sqr(const elastic_session* session);
double elastic_session_grad_var(const elastic_session* session);
/* Records one finished step of step_time_s seconds covering samples samples. */
int elastic_session_report_step(elastic_session* session, double step_time_s, uint64_t samples);

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_MPI_ELASTIC_MPI_H_ */
