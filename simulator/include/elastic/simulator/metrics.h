// Metrics of a simulation: the summary, the per-job CSV, the GPUs-in-use series and plots.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "elastic/common/error.h"
#include "elastic/simulator/simulator.h"

namespace elastic::simulator {

struct Summary {
  size_t jobs = 0;
  size_t jobs_finished = 0;      // finished at all, or by the horizon when one is given
  size_t jobs_finished_all = 0;  // finished by the end of the simulation
  double horizon_s = 0.0;        // 0: none
  double avg_jct_s = 0.0;        // over finished jobs
  double median_jct_s = 0.0;
  double p99_jct_s = 0.0;
  double makespan_s = 0.0;       // last finish (or the simulation end when some never finish)
  double gpu_hours = 0.0;        // GPU time held by jobs until they finished
  double utilisation = 0.0;      // gpu_hours / (GPUs x makespan)
  double rescales_per_job = 0.0;
  double solve_ms_total = 0.0;
  double wall_ms = 0.0;
};

// Percentiles use the nearest-rank rule on the sorted JCTs (p99 of 160 jobs = the 159th).
Summary Summarise(const SimResult& r, double horizon_s = 0.0);
nlohmann::json ToJson(const Summary& s);

// name,app,arrival_s,start_s,finish_s,jct_s,gpu_hours,rescales,max_gpus,last_batch
std::string JobsCsv(const SimResult& r);
// time_s,gpus_allocated,jobs_running,jobs_pending
std::string EpochsCsv(const SimResult& r);

// Writes jobs.csv, epochs.csv, summary.json, and with gnuplot (when found on PATH)
// jct_cdf.svg and gpus.svg into `dir` (created). kUnavailable when gnuplot is missing or fails
// (the CSV files are written anyway).
Status WriteOutputs(const SimResult& r, const Summary& s, const std::string& dir, const std::string& title);

}  // namespace elastic::simulator
