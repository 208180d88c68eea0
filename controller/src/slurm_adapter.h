// The controller's view of Slurm, through libslurm: nodes with their GPUs, jobs with their
// requests, who administers Slurm (SlurmUser, AdminLevel in slurmdbd), and the few actions
// elasticd takes (submit, link and release an extension job, cancel a job). Every call is timed
// and logged at debug level. Differences between Slurm releases stay in this adapter.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/common/gres.h"

namespace elastic::controller {

// A node's GPUs of one type.
struct TypedGpus {
  std::string type;
  int gpus = 0;       // configured
  int gpus_used = 0;  // allocated to jobs
};

struct NodeInfo {
  std::string name;
  std::string gpu_type;  // "" for a node without typed GPUs, "mixed" for one with several types
  int gpus = 0;          // configured, all types
  int gpus_used = 0;     // allocated to jobs, all types
  // Per type, for a node with several GPU types (empty: the single type above).
  std::vector<TypedGpus> by_type;
  // The node's GPUs per type: by_type, or its single type.
  std::vector<TypedGpus> Types() const {
    return by_type.empty() ? std::vector<TypedGpus>{{gpu_type, gpus, gpus_used}} : by_type;
  }
  bool usable = true;    // up and not drained, draining, failing, reserved or in maintenance
  bool draining = false; // drain requested (jobs may still run)
  // State not known to slurmctld right now (not responding, or just after slurmctld restarted and
  // before the node registered again): not usable for growth, but no reason to move work off it.
  bool unresponsive = false;
  // Free GPUs of `type` ("": the node's single type) for growth.
  int FreeOf(const std::string& type) const {
    if (!usable) return 0;
    for (const auto& t : Types()) {
      if (t.type == type) return std::max(0, t.gpus - t.gpus_used);
    }
    return 0;
  }
};

enum class SlurmJobState { kPending, kRunning, kSuspended, kEnded };

struct JobInfo {
  uint32_t id = 0;
  uint32_t user_id = 0;
  uint32_t group_id = 0;
  std::string user;
  std::string account;
  std::string partition;
  std::string qos;
  std::string name;
  std::string admin_comment;
  std::string nodes;       // allocated nodes (hostlist), running jobs
  std::vector<std::string> node_names;  // the same, one name each
  SlurmJobState state = SlurmJobState::kEnded;
  bool held = false;       // pending with priority 0
  bool waits_for_resources = false;  // pending only for lack of resources (or priority)
  int gpus = 0;            // allocated (running) or requested (pending)
  std::string gpu_type;    // the single type, "" when untyped or mixed
  std::string request_type;  // the type its GPU request names ("" when untyped: --gres=gpu:N)
  // Pending jobs whose GPU request is per node (--gres=gpu[:TYPE]:G, --gpus-per-node): G, and the
  // nodes it needs at least; both 0 when its request is not per node (--gpus=N for the job).
  int gpus_per_node = 0;
  int nodes_min = 0;
  uint32_t priority = 0;   // pending jobs: Slurm's priority (the higher starts first)
  int64_t time_limit_s = 0;  // 0: none
  int64_t end_time = 0;    // expected end (running jobs), seconds since the epoch
  int64_t start_time = 0;
  // Ended jobs: the batch script's exit status (-1: killed by a signal or unknown), and whether
  // Slurm is still cleaning up its processes (COMPLETING).
  int exit_code = -1;
  bool completing = false;
  int restarts = 0;        // times Slurm has requeued the job (SLURM_RESTART_COUNT)
  // Job arrays: the array's id (its first task's job id; 0 when the job is no array task), the
  // task's index, and for the record of tasks still pending together, their indexes as Slurm
  // writes them ("1-7", "1,3,5-9:2", with "%N" for a throttle) and array_task_id unset (-1).
  uint32_t array_job_id = 0;
  int64_t array_task_id = -1;
  std::string array_tasks_pending;
};

// A user's AdminLevel in Slurm's accounting (sacctmgr's adminlevel): None, Operator or
// Administrator. A user slurmdbd has no record of is None.
enum class AdminLevel { kNone, kOperator, kAdministrator };

struct ExtensionSubmission {
  std::string name;
  uint32_t user_id = 0;
  uint32_t group_id = 0;
  std::string account;
  std::string partition;
  std::string qos;
  std::string node;
  std::string gpu_type;
  int gpus = 0;
  int64_t time_limit_min = 0;
  std::string work_dir;
  std::string script;
  std::vector<std::string> environment;  // NAME=value
};

class SlurmAdapter {
 public:
  // Initialises libslurm with `slurm_conf` ("" for Slurm's default / $SLURM_CONF).
  explicit SlurmAdapter(const std::string& slurm_conf);
  ~SlurmAdapter();

  Result<std::vector<NodeInfo>> LoadNodes();
  Result<std::vector<JobInfo>> LoadJobs();
  // The job table if slurmctld changed it after `*since` (its last update time; 0: any), else
  // nullopt; `*since` becomes the table's update time. For the watch between epochs: an unchanged
  // table costs slurmctld one short answer.
  Result<std::optional<std::vector<JobInfo>>> LoadJobsIfChanged(time_t* since);
  Result<JobInfo> LoadJob(uint32_t job_id);  // kNotFound when slurmctld no longer knows it

  // Submits a held extension job (priority 0) and returns its id.
  Result<uint32_t> SubmitHeld(const ExtensionSubmission& sub);
  Status SetAdminComment(uint32_t job_id, const std::string& text);
  Status Release(uint32_t job_id);
  // Cancels a job (SIGKILL to every step, as scancel does). A job that already ended is fine.
  Status Cancel(uint32_t job_id);
  // One task of a job array, named as Slurm's commands name it ("12_3"): held (priority 0),
  // released, or cancelled (a task that already ended is fine). Holding or releasing one task of
  // the array's pending record splits it off as a job of its own.
  Status HoldArrayTask(uint32_t array_job, uint32_t task);
  Status ReleaseArrayTask(uint32_t array_job, uint32_t task);
  Status CancelArrayTask(uint32_t array_job, uint32_t task);
  // Requeues an ended batch job (`scontrol requeue`). Slurm starts it again once the
  // credentials of its last run have expired (AuthInfo cred_expire, 120 s by default): an earlier
  // start on the same node fails with "Job credential revoked". kUnavailable while the job is
  // still completing: try again later.
  Status Requeue(uint32_t job_id);
  // Requeues a running batch job held (`scontrol requeuehold`): Slurm ends it (SIGTERM, then
  // SIGKILL after KillWait) and keeps it pending until released.
  Status RequeueHold(uint32_t job_id);
  // Sends a pending, held job to other nodes and releases it, in one update: its excluded nodes
  // become `exclude` (comma-separated), its begin time now (the cred_expire delay of a requeued
  // job guards the nodes it ran on, which `exclude` names), its priority Slurm's again.
  Status ReleaseExcluding(uint32_t job_id, const std::string& exclude);

  // The uid of SlurmUser, as slurmctld reports it (slurm_load_ctl_conf). kUnavailable when
  // slurmctld cannot be reached.
  Result<uint32_t> SlurmUserId();
  // Whether slurm.conf's PrivateData includes `jobs` (users see only their own jobs), as
  // slurmctld reports it (slurm_load_ctl_conf). kUnavailable when slurmctld cannot be reached.
  Result<bool> JobsArePrivate();
  // The AdminLevel that slurmdbd records for `user` (slurmdb_users_get over a connection opened
  // and closed for this call); kNone when slurmdbd has no such user, kUnavailable when slurmdbd
  // cannot be reached or refuses the query. Blocks up to Slurm's MessageTimeout + 35 s when
  // slurmdbd accepts but does not answer.
  Result<AdminLevel> AdminLevelOf(const std::string& user);
};

// The GPU parsers of Slurm's text forms (common/include/elastic/common/gres.h).
using slurm_text::ParseGpuGres;
using slurm_text::ParseGpuGresByType;
using slurm_text::ParseGpuTres;
using slurm_text::RunningJobGpus;

}  // namespace elastic::controller
