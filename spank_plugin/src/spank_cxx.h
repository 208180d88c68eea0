// spank.h for C++: it declares the slurm_spank_* functions and spank_options[] outside any
// extern "C" block, so C++ code includes it through this header. slurm.h comes through the Slurm
// API adapter (slurm_api.h), with what differs between Slurm releases.
#pragma once

#include "elastic/slurm_api/slurm_api.h"

extern "C" {
#include <slurm/spank.h>
}
