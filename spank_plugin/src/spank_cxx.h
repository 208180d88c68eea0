// spank.h for C++: it declares the slurm_spank_* functions and spank_options[] outside any
// extern "C" block, so C++ code includes it through this header.
#pragma once

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}
