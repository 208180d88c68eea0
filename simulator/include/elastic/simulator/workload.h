// Workloads: the jobs a simulation replays, from the Pollux/Sia workload CSVs, from a window of
// the Philly trace, or from a site's own Slurm accounting (`sacct -P`).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/simulator/application.h"

namespace elastic::simulator {

// One job as submitted: what a rigid user asked for (GPUs and batch), and the model that
// stands for it. Elastic bounds for the elastic policies are decided by the simulator
// (SimConfig::elastic_max_gpus) unless max_gpus is set here.
struct JobSpec {
  std::string name;
  double arrival_s = 0.0;
  std::string app;
  int req_gpus = 1;
  int64_t req_batch = 0;  // 0: the application's initial batch
  int max_gpus = 0;       // 0: by the simulator's rule
  // Who submitted it, as far as the workload says (the Philly trace: its virtual cluster, the
  // `cluster` column); empty when unknown. Only the rule that groups sweeps (sweeps.h) reads it.
  std::string user;
};

// Pollux workload CSV: name,time,application,num_replicas,batch_size (header required; the
// order of the columns may differ). Applications must be in `apps`.
Result<std::vector<JobSpec>> ReadPolluxWorkload(const std::string& path, const AppTable& apps);
Result<std::vector<JobSpec>> ParsePolluxWorkload(const std::string& text, const std::string& path, const AppTable& apps);

// Pollux's rule from a job's GPU-time to the model standing for it: under 1 h cifar10 or ncf
// (a fair coin), under 10 h deepspeech2 (half of them bert), under 100 h yolov3, otherwise
// imagenet. `rng` draws the coins.
std::string MapByGpuTime(double gpu_time_s, std::mt19937_64& rng);

// The rigid request for `gpus` GPUs of `app`: the validated batch that finishes soonest on
// whole-node packing (Pollux's get_best_batch_size rule), `gpus` capped at what the batch
// bounds allow.
JobSpec RigidRequest(const Application& app, int gpus);

// A window of the Philly trace (traces/philly.csv: timestamp,duration,num_gpus,gpu_time,
// cluster; the virtual cluster becomes JobSpec::user when the column is there): the jobs submitted in [start, start + hours) where start is "YYYY-MM-DD HH:MM:SS"
// (empty: the first timestamp of the file), arrivals relative to the window, models by
// MapByGpuTime with `seed`, requests by RigidRequest with num_gpus capped at `max_gpus`.
// `max_jobs` > 0 keeps that many (a seeded sample) as Pollux's 160-job workloads did.
struct PhillyWindow {
  std::string start;
  double hours = 8.0;
  size_t max_jobs = 0;
  int max_gpus = 64;
  uint64_t seed = 1;
};
Result<std::vector<JobSpec>> ReadPhillyWindow(const std::string& path, const PhillyWindow& window,
                                              const AppTable& apps);

// A site's accounting export: `sacct -P -X --format=JobID,JobName,Submit,ElapsedRaw,AllocTRES`
// ('|'-separated, header line; extra columns are ignored), or `sacct -X --json` (recognised by
// its leading '{': job_id, name, time.submission, time.elapsed, tres.allocated gres "gpu").
// GPUs from AllocTRES `gres/gpu=N` (jobs without GPUs are skipped); GPU-time = elapsed x GPUs;
// arrivals relative to the
// earliest Submit; models by MapByGpuTime with `seed`; requests by RigidRequest with the job's
// GPUs (capped at `max_gpus`).
Result<std::vector<JobSpec>> ReadSacct(const std::string& path, const AppTable& apps, int max_gpus, uint64_t seed);
Result<std::vector<JobSpec>> ParseSacct(const std::string& text, const std::string& path, const AppTable& apps,
                                        int max_gpus, uint64_t seed);

// Seconds since the epoch of "YYYY-MM-DD HH:MM:SS" or "YYYY-MM-DDTHH:MM:SS" (UTC), or error.
Result<double> ParseTimestamp(const std::string& s);

}  // namespace elastic::simulator
