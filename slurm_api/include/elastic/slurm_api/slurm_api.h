// The Slurm API adapter: Slurm's C headers for C++, and every difference between the Slurm
// releases the project supports (22.05 on Debian 12, 24.11 on Debian 13; the controller and the
// plugin also compile against 26.05's headers, Debian unstable) that its code meets.
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
//  - 26.05 names a job by a slurm_step_id_t (job id, step, sluid) where 24.11 took a uint32_t
//    job id: slurm_load_job, slurm_kill_job, slurm_requeue, job_desc_msg_t.job_id (now step_id.job_id) and
//    submit_response_msg_t.job_id (now step_id.job_id); slurm_free_ctl_conf is slurm_free_conf.
//    LoadJob, KillJob, RequeueJob, SetJobId, SubmittedJobId and FreeConf below hide it. (Checked against
//    24.11 and 26.05 only: the change lies between them, the 26.05 side is taken for any later
//    release.)
//  - hostlist_t is a pointer type in 22.05 and the struct itself from 23.11 (the slurm_hostlist_*
//    functions take `hostlist_t *`): NodeNames below never names it.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

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

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
#define ELASTIC_SLURM_STEP_ID_API 1
// A whole job, as 26.05's calls name it.
inline slurm_step_id_t WholeJob(uint32_t job_id) {
  slurm_step_id_t id{};
  id.job_id = job_id;
  id.step_het_comp = NO_VAL;
  id.step_id = NO_VAL;
  return id;
}
#endif

// One job's record (slurm_load_job).
inline int LoadJob(job_info_msg_t** resp, uint32_t job_id, uint16_t show_flags) {
#ifdef ELASTIC_SLURM_STEP_ID_API
  return slurm_load_job(resp, WholeJob(job_id), show_flags);
#else
  return slurm_load_job(resp, job_id, show_flags);
#endif
}

// Signals every step of a job (slurm_kill_job).
inline int KillJob(uint32_t job_id, uint16_t signal, uint16_t flags) {
#ifdef ELASTIC_SLURM_STEP_ID_API
  return slurm_kill_job(WholeJob(job_id), signal, flags);
#else
  return slurm_kill_job(job_id, signal, flags);
#endif
}

// Requeues a batch job (slurm_requeue).
inline int RequeueJob(uint32_t job_id, uint32_t flags) {
#ifdef ELASTIC_SLURM_STEP_ID_API
  return slurm_requeue(WholeJob(job_id), flags);
#else
  return slurm_requeue(job_id, flags);
#endif
}

// The job an update request (slurm_update_job) applies to.
inline void SetJobId(job_desc_msg_t& d, uint32_t job_id) {
#ifdef ELASTIC_SLURM_STEP_ID_API
  d.step_id = WholeJob(job_id);
#else
  d.job_id = job_id;
#endif
}

// The id of a job that slurm_submit_batch_job accepted.
inline uint32_t SubmittedJobId(const submit_response_msg_t& r) {
#ifdef ELASTIC_SLURM_STEP_ID_API
  return r.step_id.job_id;
#else
  return r.job_id;
#endif
}

// Frees what slurm_load_ctl_conf returned.
inline void FreeConf(slurm_conf_t* conf) {
#ifdef ELASTIC_SLURM_STEP_ID_API
  slurm_free_conf(conf);
#else
  slurm_free_ctl_conf(conf);
#endif
}

// The node names of a Slurm host list ("n[1-3],gpu07": n1, n2, n3, gpu07), in its order.
inline std::vector<std::string> NodeNames(const char* hostlist) {
  std::vector<std::string> names;
  if (hostlist == nullptr || *hostlist == '\0') return names;
  auto* hl = slurm_hostlist_create(hostlist);
  if (hl == nullptr) return names;
  while (char* host = slurm_hostlist_shift(hl)) {
    names.emplace_back(host);
    std::free(host);
  }
  slurm_hostlist_destroy(hl);
  return names;
}

}  // namespace elastic::slurm_api
