// elasticd's SQLite journal (controller/src/db.cpp), read-only: elastic jobs, their GPU-count
// intervals, rescales and extension records. The database may be in WAL mode with elasticd
// writing to it; it is opened read-only and read in one transaction (a consistent snapshot).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::report {

struct StepSample {  // one step-time sample the runtime reported (jobs.data "samples")
  int gpus = 0;
  double local_batch = 0;
  double step_time_s = 0;
};

struct JournalJob {
  uint64_t id = 0;
  std::string user, account, partition, gpu_type, state;
  int base_gpus = 0;
  double registered_at = 0, ended_at = 0;  // ended_at 0: still running
  std::vector<StepSample> samples;
};

struct Interval {  // the job held `gpus` GPUs from start to end (end 0: still open)
  uint64_t job = 0;
  double start = 0, end = 0;
  int gpus = 0;
};

struct Rescale {
  uint64_t job = 0;
  std::string kind;  // grow | shrink
  int64_t group = 0;
  int from_gpus = 0, to_gpus = 0;
  double requested_at = 0, done_at = 0;  // done_at 0: not finished
  bool ok = false;
  double pause_s = 0;
};

struct JournalExtension {
  uint64_t parent = 0;
  int64_t group = 0;
  uint64_t slurm_job = 0;  // 0: never accepted by slurmctld
  int gpus = 0;
  std::string state;
};

struct JournalTrial {  // a fused sweep's trial as its leader reported it (trials table)
  uint64_t array_job = 0;
  uint32_t task = 0;
  uint64_t leader = 0;
  int64_t steps = 0;
  std::string state, result;
};

struct Journal {
  std::map<uint64_t, JournalJob> jobs;
  std::vector<Interval> intervals;  // ordered by job, start
  std::vector<Rescale> rescales;    // ordered by job, requested_at
  std::vector<JournalExtension> extensions;
  std::vector<JournalTrial> trials;  // ordered by array_job, task (none in a journal older than fused sweeps)
  std::vector<std::string> warnings;  // rows that could not be read completely
};

// Reads the journal at `path`. kUnavailable when it cannot be opened or read, kInvalidArgument
// when it is not an elasticd state database (a table is missing). Messages name the path.
Result<Journal> ReadJournal(const std::string& path);

}  // namespace elastic::report
