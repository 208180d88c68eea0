// The Slurm API adapter: Slurm's C headers for C++, and every difference between the Slurm
// releases the project supports (22.05 on Debian 12, 24.11 on Debian 13) that its code meets.
// Code that calls libslurm includes this header, never <slurm/slurm.h> directly, and never tests
// SLURM_VERSION_NUMBER itself. What changed, and what the rest of the code need not know:
//  - slurm_get_errno() is gone in 24.11: a failed call sets errno (SlurmErrno below).
//  - job_info_t: state_reason is uint32_t (was uint16_t) and compares with the same enum
//    job_state_reason values; power_flags, select_jobinfo and show_flags are gone (unused here).
//  - slurm_job_cpus_allocated_on_node*, slurm_print/sprint_job_info* and slurm_xlate_job_id are
//    gone (unused here).
//  - The list types are `List` in 22.05 and `list_t *` in 24.11, both `struct xlist *`: code
//    never names either (slurm_list_* functions and `auto`).
//  - spank.h only gains spank_prepend_task_argv; struct spank_option and the items are unchanged.
#pragma once

#include <cerrno>

extern "C" {
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
}

namespace elastic::slurm_api {

// The Slurm error code of the last failed libslurm call on this thread.
inline int SlurmErrno() {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 11, 0)
  return errno;
#else
  return slurm_get_errno();
#endif
}

}  // namespace elastic::slurm_api
