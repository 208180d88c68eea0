// Every statement elasticd runs on its state database, one named function each: the rest of the
// controller speaks of jobs, extensions, commands, rescales, GPU intervals, epochs and audit
// records, never of SQL. The tables are in elastic/common/journal_schema.h. State names are
// converted here (ExtStateName, ParseExtState): the stored text is what it always was.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "db.h"
#include "registry.h"

namespace elastic::controller::records {

// ---- jobs
// Elastic jobs in state 'running', as stored (ElasticJob::FromJson of their data).
std::vector<ElasticJob> LoadRunningJobs(Database& db);
// Jobs elasticd requeued to move them to another GPU type, not yet registered again (state 'moving').
std::vector<ElasticJob> LoadMovingJobs(Database& db);
// Ended jobs to requeue (state 'restart': their world was lost).
std::set<uint32_t> LoadRestarts(Database& db);
// Inserts or updates the job's row; an ended job gets ended_at = now.
void SaveJob(Database& db, const ElasticJob& job, double now);
// Writes a recorded registry entry (ElasticJob::ToJson) as a running job (replays, tests).
void SeedRunningJob(Database& db, const nlohmann::json& record);
void MarkRestart(Database& db, uint32_t job);  // an ended job whose world was lost: requeue it
void EndRestart(Database& db, uint32_t job);   // requeued, or given up: ended
// The highest group id the job's extensions ever used (0: none).
int MaxGroup(Database& db, uint32_t parent);

// ---- extensions
// Every extension not in a final state. A row with a state name elasticd never wrote is skipped
// (and logged).
std::vector<Extension> LoadActiveExtensions(Database& db);
// Inserts the extension (its id 0) and returns the new id.
int64_t InsertExtension(Database& db, const Extension& e);
// Stores slurm_job, state and joined_at; a final state sets ended_at = now (once).
void UpdateExtension(Database& db, const Extension& e, double now);
void SetExtensionReason(Database& db, int64_t id, const std::string& reason);

// ---- commands to a job's runtime
int64_t QueueCommand(Database& db, uint32_t job, const nlohmann::json& body, double now);
// The job's commands not yet acknowledged (queued or delivered), in the order they were queued.
struct OutstandingCommand {
  int64_t id = 0;
  nlohmann::json body;
  bool delivered = false;  // sent to the runtime at an earlier poll
};
std::vector<OutstandingCommand> OutstandingCommands(Database& db, uint32_t job);
// Marks a queued command delivered, with `body` as it was sent (null: the body as queued).
void MarkDelivered(Database& db, int64_t command, const nlohmann::json& body);
struct StoredCommand {
  nlohmann::json body;
  bool acknowledged = false;  // acked or failed already (its state; queued, delivered, cancelled: not)
};
std::optional<StoredCommand> FindCommand(Database& db, int64_t command, uint32_t job);
// The global batches of the job's commands not yet acknowledged (queued or delivered) that name one.
std::vector<int64_t> PendingCommandBatches(Database& db, uint32_t job);
// acked (ok) or failed, with the acknowledgement as its result.
void FinishCommand(Database& db, int64_t command, bool ok, double now, const std::string& result);
// A queued command carried out by another (a grow by relaunch that joins in `into`'s relaunch):
// cancelled, its result {"folded_into": into}.
void FoldCommand(Database& db, int64_t command, int64_t into, double now);
void CancelCommands(Database& db, uint32_t job);                 // every one not yet acknowledged
void CancelGroupCommands(Database& db, uint32_t job, int group);  // those of one group

// ---- rescales
void StartRescale(Database& db, uint32_t job, const std::string& kind, int group, int from_gpus, int to_gpus,
                  double now);
// Finishes the open rescale of (job, group, kind).
// The sizes of a rescale not finished yet (groups folded into one relaunch pass one after the other).
void SetRescaleSizes(Database& db, uint32_t job, int group, const std::string& kind, int from_gpus, int to_gpus);
void FinishRescale(Database& db, uint32_t job, int group, const std::string& kind, bool ok, double pause_s,
                   const nlohmann::json& phases, double now);

// ---- GPU-count intervals: closes the open one, opens one at `gpus` (none at 0).
void SetGpus(Database& db, uint32_t job, int gpus, const std::string& gpu_type, double now);

// ---- audit and epochs
void Audit(Database& db, double now, std::optional<uid_t> actor, const std::string& action, uint32_t job,
           const nlohmann::json& detail);
void RecordEpoch(Database& db, double started_at, double duration_ms, const std::string& policy, int64_t jobs,
                 std::optional<double> objective, const nlohmann::json& inputs, const nlohmann::json& decisions);

// A fused sweep's trial as its leader reported it (the journal's trials table).
void RecordTrial(Database& db, double now, uint32_t array_job, uint32_t task, uint32_t leader, int64_t steps,
                 const std::string& state, const std::string& result);

}  // namespace elastic::controller::records
