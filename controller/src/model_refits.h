// Which jobs' step-time models are fitted in an epoch. A fit (NLopt, FitModel in job_model.h)
// costs milliseconds, and elasticd is single-threaded: fitting every due job in one epoch would
// stop its server for seconds at thousands of jobs (after a restart, every job measured at two
// sizes whose fit had not been saved yet is due; a saved fit is restored with its job). So each epoch fits due jobs, most urgent first, until scheduler.fit_budget_ms is
// spent, and every other job keeps its last fit (the prior if it has none) until its turn.
//
// Order: first the jobs that have no fit yet or ran at a size their fit has not seen (the plan
// needs their model: a fit of one size is no model), then those with twice the samples their fit
// saw, then stale fits (FitDue); within each, the one due the longest first (ties: job id). Each
// job can be in the first two groups only a few times (once per new size, once per doubling of its
// samples), so stale fits are delayed by a bounded amount of work, and among themselves they are
// served in turn: a job's place is fixed while it waits, and a job just fitted goes stale a refit
// period later at the earliest. At least one job is fitted per epoch, whatever the budget.
#pragma once

#include <functional>

#include <nlohmann/json.hpp>

#include "registry.h"

namespace elastic::controller {

// What an epoch's refits did.
struct RefitReport {
  int due = 0;             // jobs whose model was due for a fit
  int fitted = 0;          // fits made
  int fitted_new = 0;      // of them, first fits and fits after a new size
  int left_new = 0;        // jobs left for later epochs that have no fit of their size yet
  double oldest_wait_s = 0;  // of the jobs left, the longest since its fit became due
  double ms = 0;           // the stage: choosing the jobs and fitting
  double longest_ms = 0;   // the slowest single fit

  nlohmann::json ToJson() const;
};

// Milliseconds on a monotonic clock. RefitModels reads it before choosing the jobs, after
// choosing them, and after each fit; tests pass a clock of their own (an injected cost per fit).
using MsClock = std::function<double()>;
double SteadyClockMs();

// Fits the due models of the registry's jobs, most urgent first, while less than budget_ms has
// passed since the stage began (at least one fit when any is due). The stage's time is then
// below budget_ms plus one fit. `now` in Unix seconds.
RefitReport RefitModels(const Registry& registry, double budget_ms, double now,
                        const MsClock& clock = SteadyClockMs);

}  // namespace elastic::controller
