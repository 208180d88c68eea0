#include "registry.h"

#include <array>
#include <chrono>
#include <utility>

#include "elastic/common/log.h"

namespace elastic::controller {
namespace {

constexpr std::array<std::pair<ExtState, std::string_view>, 10> kNames{{
    {ExtState::kSubmitting, "submitting"},
    {ExtState::kSubmitted, "submitted"},
    {ExtState::kRegistered, "registered"},
    {ExtState::kReady, "ready"},
    {ExtState::kJoining, "joining"},
    {ExtState::kJoined, "joined"},
    {ExtState::kLeaving, "leaving"},
    {ExtState::kLeft, "left"},
    {ExtState::kFailed, "failed"},
    {ExtState::kCancelled, "cancelled"},
}};

// The allowed moves between active states. Besides these, an active extension may always end
// (left, failed, cancelled): its job ended, its parent ended, it timed out, or its runtime said
// it left. A final state moves nowhere.
constexpr std::array<std::pair<ExtState, ExtState>, 8> kMoves{{
    {ExtState::kSubmitting, ExtState::kSubmitted},   // released in Slurm (or adopted after a restart)
    {ExtState::kSubmitting, ExtState::kRegistered},  // its batch step registered before the release was recorded
    {ExtState::kSubmitted, ExtState::kRegistered},   // its batch step registered (register_extension)
    {ExtState::kSubmitted, ExtState::kJoining},      // ready: a grow command queued
    {ExtState::kRegistered, ExtState::kJoining},     // ready: a grow command queued
    {ExtState::kJoining, ExtState::kJoined},         // the grow acknowledged
    {ExtState::kJoined, ExtState::kLeaving},         // a shrink command queued
    {ExtState::kLeaving, ExtState::kJoined},         // the shrink failed: the group stays
}};

bool Final(ExtState s) { return s == ExtState::kLeft || s == ExtState::kFailed || s == ExtState::kCancelled; }

}  // namespace

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string_view ExtStateName(ExtState s) {
  for (const auto& [state, name] : kNames) {
    if (state == s) return name;
  }
  return "failed";
}

std::optional<ExtState> ParseExtState(std::string_view name) {
  for (const auto& [state, n] : kNames) {
    if (n == name) return state;
  }
  return std::nullopt;
}

bool ExtTransitionAllowed(ExtState from, ExtState to) {
  if (from == to) return true;
  if (Final(from)) return false;
  if (Final(to)) return true;
  for (const auto& [f, t] : kMoves) {
    if (f == from && t == to) return true;
  }
  return false;
}

// ---------------------------------------------------------------- records
nlohmann::json ElasticJob::ToJson() const {
  nlohmann::json samples_json = nlohmann::json::array();
  for (const auto& s : samples) samples_json.push_back({s.nodes, s.gpus, s.local_batch, s.step_time});
  nlohmann::json grow_batch_json = nlohmann::json::object();
  for (const auto& [gpus, b] : grow_batch) grow_batch_json[std::to_string(gpus)] = b;
  nlohmann::json j{{"id", id},           {"uid", uid},
                   {"gid", gid},         {"user", user},
                   {"account", account}, {"partition", partition},
                   {"gpu_type", gpu_type}, {"base_gpus", base_gpus},
                   {"spec", spec},       {"state", state},
                   {"init_token", init_token}, {"launcher", launcher},
                   {"paused", paused},   {"registered_at", registered_at},
                   {"last_rescale_at", last_rescale_at}, {"rescales", rescales},
                   {"batch", batch},     {"next_group", next_group}, {"relaunch_groups", relaunch_groups},
                   {"grow_backoff_until", grow_backoff_until},
                   {"metrics_received", metrics_received},
                   {"samples_done", samples_done}, {"total_samples", total_samples},
                   {"metrics_at", metrics_at}, {"lr_factor", lr_factor},
                   {"grow_batch", grow_batch_json}, {"batch_command", batch_command},
                   {"batch_command_at", batch_command_at},
                   {"samples", samples_json}};
  if (!fuse.is_null()) j["fuse"] = fuse;
  if (!type_speed.empty()) j["type_speed"] = type_speed;
  if (!move.is_null()) j["move"] = move;
  if (!samples_by_type.empty()) {
    nlohmann::json by_type = nlohmann::json::object();
    for (const auto& [type, list] : samples_by_type) {
      for (const auto& s : list) by_type[type].push_back({s.nodes, s.gpus, s.local_batch, s.step_time});
    }
    j["samples_by_type"] = by_type;
  }
  if (efficiency) {
    j["efficiency"] = {efficiency->init_batch, efficiency->grad_sqr, efficiency->grad_var};
  }
  if (fit) {  // the last successful fit, so that a restarted elasticd plans with it at once
    j["fit"] = {{"params", {fit->alpha_c, fit->beta_c, fit->alpha_n, fit->beta_n, fit->alpha_r, fit->beta_r, fit->gamma}},
                {"samples", fit_samples}, {"sizes", fit_sizes}, {"metrics", fit_metrics},
                {"at", fit_at}, {"refit_at", refit_at}};
  }
  return j;
}

ElasticJob ElasticJob::FromJson(const nlohmann::json& j) {
  ElasticJob job;
  job.id = j.at("id");
  job.uid = j.at("uid");
  job.gid = j.value("gid", 0u);
  job.user = j.value("user", "");
  job.account = j.value("account", "");
  job.partition = j.value("partition", "");
  job.gpu_type = j.value("gpu_type", "");
  job.base_gpus = j.value("base_gpus", 0);
  job.spec = j.value("spec", nlohmann::json::object());
  job.state = j.value("state", "running");
  job.init_token = j.value("init_token", "");
  job.launcher = j.value("launcher", nlohmann::json());
  job.paused = j.value("paused", false);
  job.registered_at = j.value("registered_at", 0.0);
  job.last_rescale_at = j.value("last_rescale_at", 0.0);
  job.rescales = j.value("rescales", 0);
  job.batch = j.value("batch", int64_t{0});
  job.next_group = j.value("next_group", 1);
  job.relaunch_groups = j.value("relaunch_groups", std::set<int>{});
  job.grow_backoff_until = j.value("grow_backoff_until", 0.0);
  job.metrics_received = j.value("metrics_received", int64_t{0});
  job.samples_done = j.value("samples_done", int64_t{0});
  job.total_samples = j.value("total_samples", int64_t{0});
  job.metrics_at = j.value("metrics_at", 0.0);
  job.lr_factor = j.value("lr_factor", 1.0);
  job.grow_batch.clear();
  const nlohmann::json grow_batch = j.value("grow_batch", nlohmann::json::object());
  for (const auto& [gpus, b] : grow_batch.items()) job.grow_batch[std::stoi(gpus)] = b.get<int64_t>();
  job.batch_command = j.value("batch_command", int64_t{0});
  job.batch_command_at = j.value("batch_command_at", 0.0);
  job.fuse = j.value("fuse", nlohmann::json());
  for (const auto& s : j.value("samples", nlohmann::json::array())) {
    job.samples.push_back({s.at(0).get<int>(), s.at(1).get<int>(), s.at(2).get<double>(), s.at(3).get<double>()});
  }
  if (auto it = j.find("move"); it != j.end() && it->is_object()) job.move = *it;
  if (auto it = j.find("type_speed"); it != j.end() && it->is_object()) {
    for (auto v = it->begin(); v != it->end(); ++v) {
      if (v->is_number()) job.type_speed[v.key()] = v->get<double>();
    }
  }
  if (auto it = j.find("samples_by_type"); it != j.end() && it->is_object()) {
    for (auto list = it->begin(); list != it->end(); ++list) {
      for (const auto& s : *list) {
        job.samples_by_type[list.key()].push_back(
            {s.at(0).get<int>(), s.at(1).get<int>(), s.at(2).get<double>(), s.at(3).get<double>()});
      }
    }
  }
  if (j.contains("efficiency")) {
    const auto& e = j["efficiency"];
    job.efficiency = optimizer::EfficiencyParams{e.at(0), e.at(1), e.at(2)};
  }
  if (j.contains("fit")) {
    const auto& f = j["fit"];
    const auto& p = f.at("params");
    job.fit = optimizer::PolluxParams{p.at(0), p.at(1), p.at(2), p.at(3), p.at(4), p.at(5), p.at(6)};
    job.fit_generation = 1;  // this process's first: the option table's cache starts empty
    job.fit_samples = f.value("samples", size_t{0});
    job.fit_sizes = f.value("sizes", size_t{0});
    job.fit_metrics = f.value("metrics", int64_t{0});
    job.fit_at = f.value("at", 0.0);
    job.refit_at = f.value("refit_at", 0.0);
  }
  return job;
}

bool Extension::Active() const { return !Final(state); }

bool Extension::InFlight() const { return Active() && state != ExtState::kJoined; }

bool Extension::InWorld() const { return state == ExtState::kJoined || state == ExtState::kLeaving; }

bool Extension::MoveTo(ExtState to) {
  if (!ExtTransitionAllowed(state, to)) {
    Log(LogLevel::kError, "controller", "extension group ", group, " of job ", parent, " (Slurm job ", slurm_job,
        "): refused the transition ", ExtStateName(state), " -> ", ExtStateName(to));
    return false;
  }
  state = to;
  return true;
}

// ---------------------------------------------------------------- registry
int Registry::CurrentGpus(const ElasticJob& job) const {
  int n = job.base_gpus;
  for (const auto& [id, e] : extensions) {
    if (e.parent == job.id && e.InWorld()) n += e.gpus;
  }
  return n;
}

int Registry::PlannedGpus(const ElasticJob& job) const {
  int n = job.base_gpus;
  for (const auto& [id, e] : extensions) {
    if (e.parent == job.id && e.Active() && e.state != ExtState::kLeaving) n += e.gpus;
  }
  return n;
}

std::pair<int, int> Registry::ReportableGpus(const ElasticJob& job) const {
  int lo = job.base_gpus;
  int hi = job.base_gpus;
  for (const auto& [id, e] : extensions) {
    if (e.parent != job.id) continue;
    if (e.state == ExtState::kJoined) lo += e.gpus;
    if (e.state == ExtState::kJoined || e.state == ExtState::kLeaving || e.state == ExtState::kJoining) hi += e.gpus;
  }
  return {lo, hi};
}

Extension* Registry::FindExtension(uint32_t parent, int group) {
  for (auto& [id, e] : extensions) {
    if (e.parent == parent && e.group == group) return &e;
  }
  return nullptr;
}

Extension* Registry::FindExtensionBySlurmJob(uint32_t slurm_job) {
  for (auto& [id, e] : extensions) {
    if (e.slurm_job == slurm_job) return &e;
  }
  return nullptr;
}

nlohmann::json Registry::JobsJson() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [id, job] : jobs) out.push_back(job.ToJson());
  return out;
}

}  // namespace elastic::controller
