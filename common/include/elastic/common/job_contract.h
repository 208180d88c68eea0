// The job contract: what the SPANK plugin, elasticd, elastic-launch, the runtime and
// elastic-report must agree on about an elastic job, each piece defined once.
//   env_vars.h        the ELASTIC_* variables: names, who sets and who reads each
//   job_spec.h        the job's spec: JSON of the `register` message and ELASTIC_* variables
//   extension_link.h  an extension's admin comment and job name
//   join_token.h      join tokens: making and checking them
// No libslurm and no MPI here: every component may include it.
#pragma once

#include "elastic/common/env_vars.h"
#include "elastic/common/extension_link.h"
#include "elastic/common/job_spec.h"
#include "elastic/common/join_token.h"
