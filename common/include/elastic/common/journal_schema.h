// elasticd's state database (its journal) as both of its users see it: elasticd creates and
// writes it (controller/src/db.cpp, db_records.cpp), elastic-report reads it
// (report/src/journal.cpp). The schema and the reads elastic-report makes are here, in one place,
// so that a change to a table is a change to this file, seen by both (docs/interfaces.md,
// section 9). The statements elasticd itself runs stay in controller/.
#pragma once

namespace elastic::journal {

// Created by elasticd on open (every statement IF NOT EXISTS: an older database gains what it
// lacks). docs/controller.md describes the tables.
inline constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '1');

-- Elastic jobs, registered when their batch step starts. data: the job record as JSON.
CREATE TABLE IF NOT EXISTS jobs (
  job_id INTEGER PRIMARY KEY,
  uid INTEGER NOT NULL,
  user TEXT NOT NULL,
  account TEXT NOT NULL,
  state TEXT NOT NULL,            -- running | ended
  registered_at REAL NOT NULL,
  ended_at REAL,
  data TEXT NOT NULL);

-- Extension jobs: one node group each. The row exists before the Slurm job does (intent),
-- so that a restart after a crash can adopt or cancel what was submitted.
CREATE TABLE IF NOT EXISTS extensions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  parent INTEGER NOT NULL,
  grp INTEGER NOT NULL,
  slurm_job INTEGER,              -- NULL until slurmctld accepted the job
  node TEXT NOT NULL,
  gpu_type TEXT NOT NULL,
  gpus INTEGER NOT NULL,
  account TEXT NOT NULL,
  token TEXT NOT NULL,
  state TEXT NOT NULL,            -- submitting submitted registered ready joining joined leaving left failed cancelled
  created_at REAL NOT NULL,
  joined_at REAL,
  ended_at REAL,
  reason TEXT,
  UNIQUE (parent, grp));

-- Commands for a job's runtime, delivered by poll and acknowledged once.
CREATE TABLE IF NOT EXISTS commands (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  body TEXT NOT NULL,
  state TEXT NOT NULL,            -- queued delivered acked failed cancelled
  created_at REAL NOT NULL,
  done_at REAL,
  result TEXT);

-- One row per scheduling epoch: what the optimizer saw and decided, and what was done.
CREATE TABLE IF NOT EXISTS epochs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at REAL NOT NULL,
  duration_ms REAL NOT NULL,
  policy TEXT NOT NULL,
  jobs INTEGER NOT NULL,
  objective REAL,
  inputs TEXT NOT NULL,
  decisions TEXT NOT NULL);

-- Every rescale with the time of each phase (seconds), as the runtime reported them.
CREATE TABLE IF NOT EXISTS rescales (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  kind TEXT NOT NULL,             -- grow | shrink
  grp INTEGER NOT NULL,
  from_gpus INTEGER NOT NULL,
  to_gpus INTEGER NOT NULL,
  requested_at REAL NOT NULL,
  done_at REAL,
  ok INTEGER,
  pause_s REAL,
  phases TEXT);

-- GPU-count intervals per elastic job (end NULL: still open).
CREATE TABLE IF NOT EXISTS intervals (
  job_id INTEGER NOT NULL,
  start REAL NOT NULL,
  end REAL,
  gpus INTEGER NOT NULL,
  gpu_type TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS intervals_job ON intervals (job_id);

-- Every action taken on a user's job, and who asked for it.
CREATE TABLE IF NOT EXISTS audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at REAL NOT NULL,
  actor_uid INTEGER,
  action TEXT NOT NULL,
  job_id INTEGER,
  detail TEXT NOT NULL);

-- Fused sweeps (--elastic-fuse): each trial (array task) a fused job trained, as its leader
-- reported it with trial_done: the trial-steps it consumed, how it ended (finished, stopped,
-- diverged) and where its result or state is.
CREATE TABLE IF NOT EXISTS trials (
  array_job INTEGER NOT NULL,
  task INTEGER NOT NULL,
  leader INTEGER NOT NULL,
  steps INTEGER NOT NULL,
  state TEXT NOT NULL,
  result TEXT NOT NULL,
  at REAL NOT NULL,
  PRIMARY KEY (array_job, task));
)sql";

// The tables a database must have for elastic-report to read it.
inline constexpr const char* kReportTables[] = {"jobs", "extensions", "rescales", "intervals"};

// The reads of elastic-report, each with its columns in the order its reader takes them.
// jobs: job_id, user, account, state (running | ended | restart | moving), registered_at, ended_at, data
// (the ElasticJob record as JSON: partition, gpu_type, base_gpus, samples [nodes, gpus,
// local_batch, step_time] are read).
inline constexpr const char* kReadJobs =
    "SELECT job_id, user, account, state, registered_at, ended_at, data FROM jobs";
inline constexpr const char* kReadIntervals = "SELECT job_id, start, end, gpus FROM intervals ORDER BY job_id, start";
inline constexpr const char* kReadRescales =
    "SELECT job_id, kind, grp, from_gpus, to_gpus, requested_at, done_at, ok, pause_s FROM rescales "
    "ORDER BY job_id, requested_at";
inline constexpr const char* kReadExtensions =
    "SELECT parent, grp, slurm_job, gpus, state FROM extensions ORDER BY parent, grp";
// trials (optional: a journal older than fused sweeps has none): array_job, task, leader, steps,
// state, result.
inline constexpr const char* kReadTrials =
    "SELECT array_job, task, leader, steps, state, result FROM trials ORDER BY array_job, task";

}  // namespace elastic::journal
