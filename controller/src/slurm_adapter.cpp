#include "slurm_adapter.h"

#include <pwd.h>
#include <strings.h>
#include <sys/wait.h>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <tuple>

extern "C" {
#include <slurm/slurmdb.h>
}

#include "elastic/common/gres.h"
#include "elastic/common/log.h"
#include "elastic/slurm_api/slurm_api.h"

namespace elastic::controller {
namespace {

constexpr const char* kComponent = "slurm";

// Times a libslurm call and logs it at debug level.
class Timed {
 public:
  explicit Timed(const char* what) : what_(what), t0_(std::chrono::steady_clock::now()) {}
  ~Timed() {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
    Log(LogLevel::kDebug, kComponent, what_, " took ", ms, " ms");
  }

 private:
  const char* what_;
  std::chrono::steady_clock::time_point t0_;
};

using slurm_api::SlurmErrno;

Status SlurmError(const std::string& what) {
  int err = SlurmErrno();
  return Status(ErrorKind::kUnavailable, what + ": " + slurm_strerror(err));
}

std::string Str(const char* s) { return s ? s : ""; }

JobInfo FromRecord(const slurm_job_info_t& j) {
  JobInfo job;
  job.id = j.job_id;
  job.user_id = j.user_id;
  job.group_id = j.group_id;
  job.user = Str(j.user_name);
  if (job.user.empty()) {
    if (passwd* pw = getpwuid(j.user_id)) job.user = pw->pw_name;
  }
  job.account = Str(j.account);
  job.partition = Str(j.partition);
  job.qos = Str(j.qos);
  job.name = Str(j.name);
  job.admin_comment = Str(j.admin_comment);
  job.nodes = Str(j.nodes);
  job.node_names = slurm_api::NodeNames(j.nodes);
  switch (j.job_state & JOB_STATE_BASE) {
    case JOB_PENDING: job.state = SlurmJobState::kPending; break;
    case JOB_RUNNING: job.state = SlurmJobState::kRunning; break;
    case JOB_SUSPENDED: job.state = SlurmJobState::kSuspended; break;
    default: job.state = SlurmJobState::kEnded; break;
  }
  job.held = job.state == SlurmJobState::kPending && j.priority == 0;
  // Jobs held, waiting on a dependency, a reservation or a limit cannot use freed GPUs.
  job.waits_for_resources = job.state == SlurmJobState::kPending && !job.held &&
                            (j.state_reason == WAIT_NO_REASON || j.state_reason == WAIT_RESOURCES ||
                             j.state_reason == WAIT_PRIORITY);
  auto [type, gpus] = job.state == SlurmJobState::kPending
                          ? ParseGpuTres(Str(j.tres_req_str))
                          : RunningJobGpus(Str(j.tres_alloc_str), Str(j.gres_total), Str(j.tres_per_node), j.num_nodes);
  job.gpu_type = type;
  job.gpus = gpus;
  job.request_type =
      slurm_text::RequestedGpuType({Str(j.tres_per_node), Str(j.tres_per_job), Str(j.tres_per_socket), Str(j.tres_per_task)});
  if (job.state == SlurmJobState::kPending) {
    job.priority = j.priority;
    job.gpus_per_node = slurm_text::RequestedGpusPerNode(Str(j.tres_per_node));
    // Its GPUs requested (tres_req_str: per node times its fewest nodes) over those per node; else
    // num_nodes (slurmctld's count or estimate for a pending job).
    if (job.gpus_per_node > 0 && job.gpus > 0 && job.gpus % job.gpus_per_node == 0) {
      job.nodes_min = job.gpus / job.gpus_per_node;
    } else if (job.gpus_per_node > 0) {
      job.nodes_min = j.num_nodes != 0 && j.num_nodes != NO_VAL ? static_cast<int>(j.num_nodes) : 1;
    }
  }
  if (j.time_limit != INFINITE && j.time_limit != NO_VAL) job.time_limit_s = static_cast<int64_t>(j.time_limit) * 60;
  job.end_time = static_cast<int64_t>(j.end_time);
  job.start_time = static_cast<int64_t>(j.start_time);
  job.completing = (j.job_state & JOB_COMPLETING) != 0;
  if (job.state == SlurmJobState::kEnded && WIFEXITED(j.exit_code)) job.exit_code = WEXITSTATUS(j.exit_code);
  job.restarts = static_cast<int>(j.restart_cnt);
  if (j.array_job_id != 0) {
    job.array_job_id = j.array_job_id;
    if (j.array_task_id != NO_VAL) job.array_task_id = j.array_task_id;
    job.array_tasks_pending = Str(j.array_task_str);
  }
  return job;
}

}  // namespace

SlurmAdapter::SlurmAdapter(const std::string& slurm_conf) {
  slurm_init(slurm_conf.empty() ? nullptr : slurm_conf.c_str());
}

SlurmAdapter::~SlurmAdapter() { slurm_fini(); }

Result<std::vector<NodeInfo>> SlurmAdapter::LoadNodes() {
  Timed t("slurm_load_node");
  node_info_msg_t* msg = nullptr;
  if (slurm_load_node(0, &msg, SHOW_ALL | SHOW_DETAIL) != SLURM_SUCCESS) return SlurmError("cannot load nodes");
  std::vector<NodeInfo> nodes;
  for (uint32_t i = 0; i < msg->record_count; ++i) {
    const node_info_t& n = msg->node_array[i];
    if (n.name == nullptr) continue;
    NodeInfo node;
    node.name = n.name;
    auto [type, gpus] = ParseGpuGres(Str(n.gres));
    node.gpu_type = type;
    node.gpus = gpus;
    node.gpus_used = ParseGpuGres(Str(n.gres_used)).second;
    if (type == "mixed") {  // several GPU types: each is planned as its own
      auto used = ParseGpuGresByType(Str(n.gres_used));
      for (const auto& [gpu_type, count] : ParseGpuGresByType(Str(n.gres))) {
        TypedGpus g{gpu_type, count, 0};
        for (const auto& [used_type, u] : used) {
          if (used_type == gpu_type) g.gpus_used = u;
        }
        node.by_type.push_back(g);
      }
    }
    uint32_t base = n.node_state & NODE_STATE_BASE;
    uint32_t flags = n.node_state;
    node.draining = (flags & NODE_STATE_DRAIN) != 0;
    // Unknown only because it has not (re)registered or does not answer right now: not when it is
    // also down, failing, draining or in maintenance (those move work off it).
    node.unresponsive = (base == NODE_STATE_UNKNOWN || (flags & NODE_STATE_NO_RESPOND) != 0) && base != NODE_STATE_DOWN &&
                        !(flags & (NODE_STATE_DRAIN | NODE_STATE_FAIL | NODE_STATE_MAINT));
    node.usable = base != NODE_STATE_DOWN && base != NODE_STATE_FUTURE && base != NODE_STATE_UNKNOWN &&
                  !(flags & (NODE_STATE_DRAIN | NODE_STATE_FAIL | NODE_STATE_MAINT | NODE_STATE_RES |
                             NODE_STATE_NO_RESPOND | NODE_STATE_POWERED_DOWN | NODE_STATE_REBOOT_REQUESTED));
    nodes.push_back(node);
  }
  slurm_free_node_info_msg(msg);
  return nodes;
}

Result<std::vector<JobInfo>> SlurmAdapter::LoadJobs() {
  Timed t("slurm_load_jobs");
  job_info_msg_t* msg = nullptr;
  if (slurm_load_jobs(0, &msg, SHOW_ALL | SHOW_DETAIL) != SLURM_SUCCESS) return SlurmError("cannot load jobs");
  std::vector<JobInfo> jobs;
  jobs.reserve(msg->record_count);
  for (uint32_t i = 0; i < msg->record_count; ++i) jobs.push_back(FromRecord(msg->job_array[i]));
  slurm_free_job_info_msg(msg);
  return jobs;
}

Result<std::optional<std::vector<JobInfo>>> SlurmAdapter::LoadJobsIfChanged(time_t* since) {
  Timed t("slurm_load_jobs(changed)");
  job_info_msg_t* msg = nullptr;
  if (slurm_load_jobs(*since, &msg, SHOW_ALL) != SLURM_SUCCESS) {
    if (SlurmErrno() == SLURM_NO_CHANGE_IN_DATA) return std::optional<std::vector<JobInfo>>();
    return SlurmError("cannot load jobs");
  }
  *since = msg->last_update;
  std::vector<JobInfo> jobs;
  jobs.reserve(msg->record_count);
  for (uint32_t i = 0; i < msg->record_count; ++i) jobs.push_back(FromRecord(msg->job_array[i]));
  slurm_free_job_info_msg(msg);
  return std::optional<std::vector<JobInfo>>(std::move(jobs));
}

Result<JobInfo> SlurmAdapter::LoadJob(uint32_t job_id) {
  Timed t("slurm_load_job");
  job_info_msg_t* msg = nullptr;
  if (slurm_api::LoadJob(&msg, job_id, SHOW_DETAIL) != SLURM_SUCCESS) {
    if (SlurmErrno() == ESLURM_INVALID_JOB_ID) {
      return Status(ErrorKind::kNotFound, "job " + std::to_string(job_id) + " is unknown to slurmctld");
    }
    return SlurmError("cannot load job " + std::to_string(job_id));
  }
  if (msg->record_count < 1) {
    slurm_free_job_info_msg(msg);
    return Status(ErrorKind::kNotFound, "job " + std::to_string(job_id) + " is unknown to slurmctld");
  }
  JobInfo job = FromRecord(msg->job_array[0]);
  slurm_free_job_info_msg(msg);
  return job;
}

Result<uint32_t> SlurmAdapter::SubmitHeld(const ExtensionSubmission& sub) {
  Timed t("slurm_submit_batch_job");
  job_desc_msg_t d;
  slurm_init_job_desc_msg(&d);
  std::string tres = "gres:gpu:" + (sub.gpu_type.empty() ? "" : sub.gpu_type + ":") + std::to_string(sub.gpus);
  std::string out = sub.work_dir + "/" + sub.name + "-%j.out";
  std::vector<char*> env;
  for (const auto& e : sub.environment) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  d.name = const_cast<char*>(sub.name.c_str());
  d.user_id = sub.user_id;
  d.group_id = sub.group_id;
  d.account = const_cast<char*>(sub.account.c_str());
  if (!sub.partition.empty()) d.partition = const_cast<char*>(sub.partition.c_str());
  if (!sub.qos.empty()) d.qos = const_cast<char*>(sub.qos.c_str());
  d.min_nodes = 1;
  d.max_nodes = 1;
  d.req_nodes = const_cast<char*>(sub.node.c_str());
  d.tres_per_node = const_cast<char*>(tres.c_str());
  d.time_limit = static_cast<uint32_t>(sub.time_limit_min);
  d.priority = 0;  // held until linked to its parent
  d.work_dir = const_cast<char*>(sub.work_dir.c_str());
  d.std_out = const_cast<char*>(out.c_str());
  d.script = const_cast<char*>(sub.script.c_str());
  d.environment = env.data();
  d.env_size = static_cast<uint32_t>(sub.environment.size());
  submit_response_msg_t* resp = nullptr;
  if (slurm_submit_batch_job(&d, &resp) != SLURM_SUCCESS) return SlurmError("cannot submit the extension job");
  uint32_t id = slurm_api::SubmittedJobId(*resp);
  slurm_free_submit_response_response_msg(resp);
  return id;
}

Status SlurmAdapter::SetAdminComment(uint32_t job_id, const std::string& text) {
  Timed t("slurm_update_job(admin_comment)");
  job_desc_msg_t u;
  slurm_init_job_desc_msg(&u);
  slurm_api::SetJobId(u, job_id);
  u.admin_comment = const_cast<char*>(text.c_str());
  if (slurm_update_job(&u) != SLURM_SUCCESS) return SlurmError("cannot set the admin comment of job " + std::to_string(job_id));
  return Status::Ok();
}

Status SlurmAdapter::Release(uint32_t job_id) {
  Timed t("slurm_update_job(release)");
  job_desc_msg_t u;
  slurm_init_job_desc_msg(&u);
  slurm_api::SetJobId(u, job_id);
  u.priority = INFINITE;
  if (slurm_update_job(&u) != SLURM_SUCCESS) return SlurmError("cannot release job " + std::to_string(job_id));
  return Status::Ok();
}

Status SlurmAdapter::Cancel(uint32_t job_id) {
  Timed t("slurm_kill_job");
  if (slurm_api::KillJob(job_id, SIGKILL, 0) != SLURM_SUCCESS) {
    int err = SlurmErrno();
    if (err == ESLURM_ALREADY_DONE || err == ESLURM_INVALID_JOB_ID) return Status::Ok();
    return SlurmError("cannot cancel job " + std::to_string(job_id));
  }
  return Status::Ok();
}

namespace {
std::string TaskName(uint32_t array_job, uint32_t task) { return std::to_string(array_job) + "_" + std::to_string(task); }

Status UpdateTaskPriority(uint32_t array_job, uint32_t task, uint32_t priority, const char* what) {
  std::string name = TaskName(array_job, task);
  job_desc_msg_t u;
  slurm_init_job_desc_msg(&u);
  u.job_id_str = name.data();
  u.priority = priority;
  if (slurm_update_job(&u) != SLURM_SUCCESS) return SlurmError(std::string("cannot ") + what + " array task " + name);
  return Status::Ok();
}
}  // namespace

Status SlurmAdapter::HoldArrayTask(uint32_t array_job, uint32_t task) {
  Timed t("slurm_update_job(hold task)");
  return UpdateTaskPriority(array_job, task, 0, "hold");
}

Status SlurmAdapter::ReleaseArrayTask(uint32_t array_job, uint32_t task) {
  Timed t("slurm_update_job(release task)");
  return UpdateTaskPriority(array_job, task, INFINITE, "release");
}

Status SlurmAdapter::CancelArrayTask(uint32_t array_job, uint32_t task) {
  Timed t("slurm_kill_job2");
  std::string name = TaskName(array_job, task);
  if (slurm_kill_job2(name.c_str(), SIGKILL, 0, nullptr) != SLURM_SUCCESS) {
    int err = SlurmErrno();
    if (err == ESLURM_ALREADY_DONE || err == ESLURM_INVALID_JOB_ID) return Status::Ok();
    return SlurmError("cannot cancel array task " + name);
  }
  return Status::Ok();
}

Status SlurmAdapter::Requeue(uint32_t job_id) {
  Timed t("slurm_requeue");
  if (slurm_api::RequeueJob(job_id, 0) != SLURM_SUCCESS) {
    const int err = SlurmErrno();
    if (err == ESLURM_TRANSITION_STATE_NO_UPDATE || err == ESLURM_JOB_PENDING) {
      return Status(ErrorKind::kUnavailable, "job " + std::to_string(job_id) + " is still completing");
    }
    // slurmctld unreachable: try again later; anything else (--no-requeue, JobRequeue=0, not a
    // batch job, access denied) is Slurm's answer, not worth repeating.
    const bool transient = (err >= SLURM_COMMUNICATIONS_CONNECTION_ERROR && err <= SLURM_COMMUNICATIONS_SHUTDOWN_ERROR) ||
                           (err >= SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR &&
                            err <= SLURMCTLD_COMMUNICATIONS_SHUTDOWN_ERROR) ||
                           err == SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT || err == ESLURM_IN_STANDBY_MODE;
    return Status(transient ? ErrorKind::kUnavailable : ErrorKind::kPermission,
                  "cannot requeue job " + std::to_string(job_id) + ": " + slurm_strerror(err));
  }
  return Status::Ok();
}

Status SlurmAdapter::RequeueHold(uint32_t job_id) {
  Timed t("slurm_requeue(hold)");
  if (slurm_api::RequeueJob(job_id, JOB_REQUEUE_HOLD) != SLURM_SUCCESS) {
    return SlurmError("cannot requeue job " + std::to_string(job_id));
  }
  return Status::Ok();
}

Status SlurmAdapter::ReleaseExcluding(uint32_t job_id, const std::string& exclude) {
  Timed t("slurm_update_job(exc_nodes, begin_time, release)");
  job_desc_msg_t u;
  slurm_init_job_desc_msg(&u);
  slurm_api::SetJobId(u, job_id);
  u.exc_nodes = const_cast<char*>(exclude.c_str());
  u.begin_time = time(nullptr);
  u.priority = INFINITE;
  if (slurm_update_job(&u) != SLURM_SUCCESS) return SlurmError("cannot send job " + std::to_string(job_id) + " to other nodes");
  return Status::Ok();
}

Result<uint32_t> SlurmAdapter::SlurmUserId() {
  Timed t("slurm_load_ctl_conf");
  slurm_conf_t* conf = nullptr;
  if (slurm_load_ctl_conf(0, &conf) != SLURM_SUCCESS || conf == nullptr) {
    return SlurmError("slurmctld did not answer");
  }
  uint32_t uid = conf->slurm_user_id;
  slurm_api::FreeConf(conf);
  return uid;
}

Result<bool> SlurmAdapter::JobsArePrivate() {
  Timed t("slurm_load_ctl_conf");
  slurm_conf_t* conf = nullptr;
  if (slurm_load_ctl_conf(0, &conf) != SLURM_SUCCESS || conf == nullptr) {
    return SlurmError("slurmctld did not answer");
  }
  // private_data is a bit set of PRIVATE_DATA_* (PRIVATE_DATA_JOBS: bit 0) in Slurm 22.05
  // through 24.11.
  const bool jobs = (conf->private_data & PRIVATE_DATA_JOBS) != 0;
  slurm_api::FreeConf(conf);
  return jobs;
}

Result<AdminLevel> SlurmAdapter::AdminLevelOf(const std::string& user) {
  Timed t("slurmdb_users_get");
  // The list types are `List` in Slurm 22.05 and `list_t *` in 24.11, both `struct xlist *`;
  // nothing below names either. The query lists are ours (no destructor): the name stays owned
  // by `user`; the answer's list frees its records itself.
  uint16_t flags = 0;
  void* conn = slurmdb_connection_get(&flags);
  if (conn == nullptr) return SlurmError("slurmdbd did not answer");
  slurmdb_assoc_cond_t assoc_cond;
  std::memset(&assoc_cond, 0, sizeof assoc_cond);
  slurmdb_user_cond_t user_cond;
  std::memset(&user_cond, 0, sizeof user_cond);
  assoc_cond.user_list = slurm_list_create(nullptr);
  slurm_list_append(assoc_cond.user_list, const_cast<char*>(user.c_str()));
  user_cond.assoc_cond = &assoc_cond;
  auto* users = slurmdb_users_get(conn, &user_cond);
  const int err = SlurmErrno();
  slurm_list_destroy(assoc_cond.user_list);
  slurmdb_connection_close(&conn);
  if (users == nullptr) {
    return Status(ErrorKind::kUnavailable,
                  std::string("slurmdbd did not answer: ") + (err != 0 ? slurm_strerror(err) : "no reply"));
  }
  AdminLevel level = AdminLevel::kNone;
  auto* it = slurm_list_iterator_create(users);
  while (auto* rec = static_cast<slurmdb_user_rec_t*>(slurm_list_next(it))) {
    if (rec->name == nullptr || strcasecmp(rec->name, user.c_str()) != 0) continue;  // slurmdbd may lowercase names
    if (rec->admin_level == SLURMDB_ADMIN_SUPER_USER) {
      level = AdminLevel::kAdministrator;
    } else if (rec->admin_level == SLURMDB_ADMIN_OPERATOR) {
      level = AdminLevel::kOperator;
    }
  }
  slurm_list_iterator_destroy(it);
  slurm_list_destroy(users);
  return level;
}

}  // namespace elastic::controller
