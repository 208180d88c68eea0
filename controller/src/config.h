// elasticd's configuration file (site-config/elasticd.conf documents every key).
// Validated completely before it is applied: a bad file, at start or at reload, changes nothing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "connection_limits.h"
#include "elastic/common/config.h"
#include "elastic/common/error.h"

namespace elastic::controller {

struct ControllerConfig {
  // [slurm]
  std::string slurm_conf;  // empty: Slurm's default (or $SLURM_CONF)
  // [controller]
  config::HostPort listen{"127.0.0.1", 6820};
  std::string munge_socket;  // empty: munge's default
  std::string state_db = "/var/lib/elasticd/state.db";
  std::string log_level = "info";
  std::string log_file;  // empty: standard error
  double admin_cache_s = 60;  // how long a user's role (SlurmUser, AdminLevel) is reused
  ServerLimits server;        // connection caps, unauthenticated bytes, frame timeout
  // [scheduler]
  double epoch_s = 60.0;
  // Event epochs (epoch_trigger.h): an epoch also runs soon after a job is submitted, starts or
  // ends, or a rescale finishes; at most one per event_min_gap_s. Slurm's job table is looked at
  // every watch_interval_s for submissions, starts and ends.
  bool event_epochs = true;
  double event_min_gap_s = 2;
  double watch_interval_s = 2;
  std::string policy = "dp";
  std::string objective = "sum";        // sum | power-mean
  double min_rescale_interval_s = 120;  // between two rescales of one job
  double min_gain = 0.05;               // relative utility gain a rescale must promise
  double rescale_cost_s = 2;            // the optimizer's rescale penalty: a stop-free rescale pauses ~1 s
  bool paused = false;                  // start with every elastic action paused
  double pending_weight = 100;          // weight of a waiting job against extension gains
  double solve_budget_ms = 300;         // the optimizer's time per epoch (exact below it)
  // Time per epoch for fitting jobs' step-time models (model_refits.h): the most urgent first, the
  // others keep their last fit until a later epoch; at least one fit per epoch.
  double fit_budget_ms = 200;
  // Remaining-time objective (jobs that report total_samples): weights (1 / hours left)^x, and
  // a rescale must save rescale_payback times its cost of the job's remaining run. 0: off.
  double srpt_exponent = 0;
  double rescale_payback = 0;
  // objective = power-mean: its exponent p (< 0; -1 Pollux's, -0.5 Sia's); power_mean_exponent_percent.
  double power_mean_p = -1;
  // [extensions]
  std::string extension_partition;      // empty: the parent's partition
  std::string extension_qos;            // empty: the user's default QOS
  int64_t extension_max_time_min = 1440;
  std::string launcher = "/usr/bin/elastic-launch";
  double ready_timeout_s = 300;         // an extension that does not join by then is cancelled
  // A group joining by relaunch that is ready waits this long at most for the job's other groups
  // submitted with it, so that they join in one relaunch (command_delivery.cpp). 0: never waits.
  double relaunch_gather_s = 10;
  // A joined extension told to leave (a shrink command queued) whose job does not carry it out by
  // then is cancelled: the job reached no rescale point. 0: off.
  double leave_timeout_s = 300;
  // GPUs an extension gives back while a job waits for that GPU type are kept from elasticd's own
  // growth this long (or until no job waits for the type), so that the waiting job gets them. 0: off.
  double release_hold_s = 120;
  // A job with less training left than this (seconds, at its current speed) is not grown;
  // negative: two epochs.
  double min_time_left_s = -1;
  double MinTimeLeftS() const { return min_time_left_s >= 0 ? min_time_left_s : 2 * epoch_s; }
  // [recovery]
  bool restart_world_lost = true;       // requeue a job that exits kExitWorldLost (75)
  int max_restarts = 3;                 // Slurm restart count at which elasticd stops requeueing
  // [types]: jobs across GPU types (type_moves.h)
  bool type_moves = true;                      // move jobs between the GPU types they accept
  std::map<std::string, double> type_speed;    // relative speed per GPU of each type (absent: 1.0)
  double move_cost_s = 120;                    // what a move costs until measured (checkpoint, requeue, restart)
  double move_payback = 2;                     // a move must save this many times its cost
  // [limits]
  int64_t default_account_extension_gpus = -1;            // -1: unlimited
  std::map<std::string, int64_t> account_extension_gpus;  // per-account cap on extension GPUs
};

// Every key, "section.key", with its help line (for --help and site-config/elasticd.conf).
std::vector<std::pair<std::string, std::string>> ConfigKeys();

// Reads and validates a configuration file. kNotFound / kConfig with the file name and the
// first problem.
Result<ControllerConfig> LoadConfig(const std::string& path);

}  // namespace elastic::controller
