// Remote context (slurmstepd), batch step. Runs as root in init_post_opt: removes ELASTIC_*
// variables the user brought, checks the job's own GPU allocation against the spec, registers
// the job (or the extension) with elasticd, and exports ELASTIC_* for the runtime. Failures of
// the user's making are reported by the task (TaskInit), never by failing the step.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "elastic/common/gres.h"
#include "elastic/common/job_contract.h"
#include "elastic/common/log.h"
#include "elastic/common/wire.h"
#include "elastic/slurm_api/slurm_api.h"
#include "plugin_state.h"

namespace elastic::spank {
namespace {

constexpr const char* kComponent = "batch";

// What the batch step needs to know about its job, from slurmctld.
struct JobRecord {
  uint32_t user_id = 0;
  uint32_t state = 0;
  std::string partition;
  std::string nodes;
  std::string admin_comment;
  int gpus = 0;              // GPUs allocated to the job (slurm_text::RunningJobGpus)
  std::string gpu_type;      // their single type ("" when untyped or mixed)
  std::string request_type;  // the type the job's GPU request names ("" when untyped)
  int64_t time_limit_s = 0;  // 0: none
  uint32_t array_job_id = 0;   // an array task's array id (the first task's job id); 0: not an array task
  uint32_t array_task_id = 0;  // its index in the array
};

Result<JobRecord> LoadJob(uint32_t job_id) {
  job_info_msg_t* msg = nullptr;
  if (slurm_api::LoadJob(&msg, job_id, SHOW_DETAIL) != SLURM_SUCCESS || msg == nullptr) {
    return Status(ErrorKind::kUnavailable, "cannot read job " + std::to_string(job_id) + " from slurmctld: " +
                                               slurm_strerror(slurm_api::SlurmErrno()));
  }
  if (msg->record_count < 1) {
    slurm_free_job_info_msg(msg);
    return Status(ErrorKind::kNotFound, "job " + std::to_string(job_id) + " does not exist");
  }
  const slurm_job_info_t& j = msg->job_array[0];
  JobRecord job;
  job.user_id = j.user_id;
  job.state = j.job_state & JOB_STATE_BASE;
  job.partition = j.partition ? j.partition : "";
  job.nodes = j.nodes ? j.nodes : "";
  job.admin_comment = j.admin_comment ? j.admin_comment : "";
  // Right after a restart of slurmctld a running job has no TRES string yet: RunningJobGpus
  // falls back to its GRES.
  auto s = [](const char* text) { return std::string(text ? text : ""); };
  std::tie(job.gpu_type, job.gpus) =
      slurm_text::RunningJobGpus(s(j.tres_alloc_str), s(j.gres_total), s(j.tres_per_node), j.num_nodes);
  job.request_type =
      slurm_text::RequestedGpuType({s(j.tres_per_node), s(j.tres_per_job), s(j.tres_per_socket), s(j.tres_per_task)});
  if (j.time_limit != INFINITE && j.time_limit != NO_VAL) job.time_limit_s = static_cast<int64_t>(j.time_limit) * 60;
  if (j.array_task_id != NO_VAL && j.array_job_id != 0) {
    job.array_job_id = j.array_job_id;
    job.array_task_id = j.array_task_id;
  }
  slurm_free_job_info_msg(msg);
  return job;
}

// A user's own values of the variables the plugin guards (contract::EnvVar::plugin_scrubs:
// those it sets, and ELASTIC_STANDALONE and ELASTIC_JOIN) are removed from an elastic job
// before the plugin sets its own; the runtime's tunables (ELASTIC_LOG_LEVEL, ...) are the
// user's business and stay.
void RemoveUserElasticVariables(spank_t sp) {
  for (const contract::EnvVar& v : contract::EnvVars()) {
    if (v.plugin_scrubs) spank_unsetenv(sp, v.name);
  }
}

void Export(spank_t sp, const std::map<std::string, std::string>& vars) {
  for (const auto& [k, v] : vars) {
    spank_err_t rc = spank_setenv(sp, k.c_str(), v.c_str(), 1);
    if (rc != ESPANK_SUCCESS) Log(LogLevel::kError, kComponent, "cannot set ", k, ": ", spank_strerror(rc));
  }
}

// One request to elasticd within the site's registration timeout.
Result<nlohmann::json> AskController(const SiteConfig& site, nlohmann::json request) {
  wire::ClientOptions opts;
  opts.munge_socket = site.munge_socket;
  opts.connect_timeout = std::chrono::milliseconds(site.register_timeout_ms);
  auto start = wire::Clock::now();
  auto client = wire::Client::Connect(*site.controller, opts);
  if (!client.ok()) return client.status();
  auto used = std::chrono::duration_cast<std::chrono::milliseconds>(wire::Clock::now() - start);
  auto left = std::chrono::milliseconds(site.register_timeout_ms) - used;
  if (left.count() < 100) left = std::chrono::milliseconds(100);
  auto reply = client.value()->Call(std::move(request), left);
  if (!reply.ok()) return reply.status();
  Status s = wire::ReplyStatus(reply.value());
  if (!s.ok()) return s;
  return reply;
}

// A fused sweep's task (--elastic-fuse): the leader gets the trials it trains, a member the job
// that trains its trial (docs/interfaces.md section 3, "Fused sweeps").
void ExportFuse(const nlohmann::json& reply, std::map<std::string, std::string>& env) {
  if (!reply.contains("fuse") || !reply["fuse"].is_object()) return;
  const nlohmann::json& fuse = reply["fuse"];
  if (fuse.value("role", "") == "leader" && fuse.contains("trials") && fuse["trials"].is_array()) {
    std::string list;
    for (const auto& t : fuse["trials"]) {
      if (t.is_number_unsigned()) list += (list.empty() ? "" : ",") + std::to_string(t.get<uint32_t>());
    }
    env[contract::kFuseTrials] = list;
  } else if (fuse.value("role", "") == "member" && fuse.contains("leader") && fuse["leader"].is_number_unsigned()) {
    env[contract::kFuseLeader] = std::to_string(fuse["leader"].get<uint32_t>());
  }
}

void ParentJob(spank_t sp, PluginState& st, uint32_t job_id, uint32_t uid) {
  ElasticSpec& spec = st.spec;
  auto job = LoadJob(job_id);
  if (!job.ok()) {
    st.task_warning = job.status().message() + "; the job runs rigid";
    Export(sp, {{contract::kMode, "rigid"}});
    return;
  }
  Status s = CheckBaseGpus(spec, job.value().gpus);
  if (s.ok()) s = CheckFusedArray(spec, job.value().array_job_id != 0);
  // sbatch cannot see the job's --gres request; its type is checked here, before the program runs:
  // the type it names, or for an untyped request (--gres=gpu:N) the type Slurm gave it.
  if (s.ok()) {
    const JobRecord& r = job.value();
    s = CheckOwnGpuType(spec, r.request_type.empty() ? r.gpu_type : r.request_type);
  }
  if (!s.ok()) {
    st.task_error = s.message();
    return;
  }
  if (!st.site.partitions.empty()) {
    bool allowed = false;
    for (const auto& p : st.site.partitions) allowed = allowed || p == job.value().partition;
    if (!allowed) {
      std::string list;
      for (const auto& p : st.site.partitions) list += (list.empty() ? "" : ", ") + p;
      st.task_error = "elastic jobs may not run in partition '" + job.value().partition + "' (allowed: " + list + ")";
      return;
    }
  }

  const contract::JobSpec job_spec = ToJobSpec(spec);
  auto env = job_spec.ToEnvironment();
  env[contract::kJobId] = std::to_string(job_id);
  env[contract::kRole] = "parent";
  env[contract::kController] = st.site.controller->ToString();
  if (!st.site.munge_socket.empty()) env[contract::kMungeSocket] = st.site.munge_socket;
  env[contract::kMode] = "rigid";

  nlohmann::json req{{"type", "register"},
                     {"job", job_id},
                     {"user", uid},
                     {"spec", job_spec.ToJson()},
                     {"nodes", job.value().nodes},
                     {"gpus", job.value().gpus},
                     {"gpu_type", job.value().gpu_type},
                     {"partition", job.value().partition},
                     {"time_limit_s", job.value().time_limit_s}};
  if (job.value().array_job_id != 0) {
    req["array_job"] = job.value().array_job_id;
    req["array_task"] = job.value().array_task_id;
  }
  auto reply = AskController(st.site, std::move(req));
  if (!reply.ok()) {
    st.task_warning = "could not register with the elastic controller at " + st.site.controller->ToString() + " (" +
                      reply.status().message() + "); the job runs rigid at " + std::to_string(spec.gpus->min) + " GPUs";
    Log(LogLevel::kInfo, kComponent, "job ", job_id, ": ", *st.task_warning);
  } else {
    const auto& r = reply.value();
    env[contract::kMode] = r.value("mode", "elastic") == "elastic" ? "elastic" : "rigid";
    if (r.contains("join_token") && r["join_token"].is_string()) env[contract::kJoinToken] = r["join_token"];
    ExportFuse(r, env);
    Log(LogLevel::kVerbose, kComponent, "job ", job_id, " registered (", Describe(spec), ")");
  }
  Export(sp, env);
}

void ExtensionJob(spank_t sp, PluginState& st, uint32_t job_id, uint32_t uid) {
  const ExtensionRef ref = *st.spec.extension;
  auto job = LoadJob(job_id);
  if (!job.ok()) {
    st.task_error = "extension job: " + job.status().message();
    return;
  }
  if (job.value().admin_comment != contract::ExtensionLink{ref.parent, ref.group}.AdminComment()) {
    st.task_error = "this job claims to extend job " + std::to_string(ref.parent) +
                    " but was not submitted by the elastic controller";
    return;
  }
  auto parent = LoadJob(ref.parent);
  if (!parent.ok()) {
    st.task_error = "extension of job " + std::to_string(ref.parent) + ": " + parent.status().message();
    return;
  }
  if (parent.value().user_id != uid) {
    st.task_error = "extension of job " + std::to_string(ref.parent) + ", which belongs to another user";
    return;
  }
  if (parent.value().state != JOB_RUNNING) {
    st.task_error = "extension of job " + std::to_string(ref.parent) + ", which is not running";
    return;
  }
  auto reply = AskController(st.site, {{"type", "register_extension"}, {"job", job_id}, {"user", uid}});
  if (!reply.ok()) {
    st.task_error = "extension of job " + std::to_string(ref.parent) + ": the elastic controller at " +
                    st.site.controller->ToString() + " did not confirm it (" + reply.status().message() + ")";
    return;
  }
  const auto& r = reply.value();
  if (r.value("parent", 0u) != ref.parent || r.value("group", 0u) != ref.group || !r.contains("join_token") ||
      !r["join_token"].is_string() || !r.contains("rendezvous_uri") || !r["rendezvous_uri"].is_string()) {
    st.task_error = "the elastic controller's join information does not match this extension";
    return;
  }
  // The parent's spec as elasticd keeps it, so that the joining group applies the same batch and
  // lr rules (JobSpec::FromJson: no spec or a malformed one gives only ELASTIC_SPEC_VERSION).
  auto env = contract::JobSpec::FromJson(r.value("spec", nlohmann::json())).ToEnvironment();
  env[contract::kMode] = "elastic";
  env[contract::kRole] = "extension";
  env[contract::kJobId] = std::to_string(ref.parent);
  env[contract::kParentJobId] = std::to_string(ref.parent);
  env[contract::kGroupId] = std::to_string(ref.group);
  env[contract::kController] = st.site.controller->ToString();
  env[contract::kJoinToken] = r["join_token"].get<std::string>();
  env[contract::kRendezvousUri] = r["rendezvous_uri"].get<std::string>();
  if (!st.site.munge_socket.empty()) env[contract::kMungeSocket] = st.site.munge_socket;
  Export(sp, env);
}

}  // namespace

void BatchStepPostOpt(spank_t sp) {
  PluginState& st = State();
  // A job without elastic options is left exactly as it would be without the plugin.
  if (!st.spec.AnyElasticOption() && !st.spec.extension && !st.option_error) return;
  RemoveUserElasticVariables(sp);
  if (st.option_error) {
    st.task_error = *st.option_error;
    return;
  }
  uint32_t job_id = 0;
  uint32_t uid = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
    st.task_warning = "cannot identify the job; it runs rigid";
    return;
  }
  if (st.spec.extension) {
    if (!st.site.enabled) {
      st.task_error = "extension job, but elastic scheduling is disabled on this cluster";
      return;
    }
    ExtensionJob(sp, st, job_id, uid);
    return;
  }
  if (!st.spec.AnyElasticOption() || st.spec.no_elastic) return;  // rigid job: nothing to do
  Status s = Validate(st.spec, st.site);  // the same checks as at submission, on the options slurmstepd got
  if (!s.ok()) {
    st.task_error = s.message();
    return;
  }
  if (!st.site.enabled) {
    auto env = SpecEnvironment(st.spec);
    env[contract::kMode] = "rigid";
    env[contract::kJobId] = std::to_string(job_id);
    env[contract::kRole] = "parent";
    Export(sp, env);
    return;
  }
  ParentJob(sp, st, job_id, uid);
}

int TaskInit(spank_t) {
  PluginState& st = State();
  if (st.task_error) {
    std::fprintf(stderr, "elastic: error: %s\n", st.task_error->c_str());
    std::fflush(stderr);
    slurm_error("elastic: %s", st.task_error->c_str());
    return -1;
  }
  if (st.task_warning) {
    std::fprintf(stderr, "elastic: warning: %s\n", st.task_warning->c_str());
    std::fflush(stderr);
  }
  return 0;
}

}  // namespace elastic::spank
