// Sia's scheduling formulation (SOSP'23) on explicit per-(type, GPU count) goodputs, solved
// exactly: the optimizer's MCKP solver first, CBC when that solver cannot prove its plan optimal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::simulator::sia {

struct Config {
  int type = 0;
  int gpus = 0;
  double goodput = 0.0;  // normalised by the job's smallest goodput over all its configurations
  double realloc = 1.0;  // multiplies the goodput when this is not the job's current configuration
};

struct JobInput {
  std::vector<Config> configs;
  int current = -1;       // index of the configuration it runs in now (-1: none)
  bool pinned = false;    // in a checkpoint-restore: it keeps its current configuration (Sia's rule)
};

struct Params {
  double p = -0.5;
  double lambda_n = 1.1;
  double clip = 3000.0;  // largest goodput^p term (Sia's clip)
  double time_budget_ms = 1000.0;
};

struct Solution {
  std::vector<int> choice;  // per job: index into configs or -1
  double objective = 0.0;   // sum of chosen (lambda_n - round(u^p, 2)), pinned jobs' bonus included
  bool by_cbc = false;
  bool proven = true;     // false: CBC failed; the MCKP solver's plan (exact_mckp.h)
  std::string cbc_error;
};

// Pollux's re-allocation factor as Sia uses it: 1 while age < cost, else
// max(0, age - restarts * cost) / (age + cost).
double ReallocFactor(double age_s, int restarts, double cost_s);

// Solves one epoch. kUnavailable when CBC is needed and cannot run.
Result<Solution> Solve(const std::vector<JobInput>& jobs, const std::vector<int64_t>& capacity, const Params& params);

}  // namespace elastic::simulator::sia
