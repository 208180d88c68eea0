// The controller's state: the registry, loaded from and saved to the state database, and the
// records every concern writes (commands, audit, GPU intervals). The concerns that act on the
// registry are in handlers.cpp, lifecycle.cpp, plan_input.cpp and epoch.cpp.
#include "controller.h"

#include "elastic/common/log.h"

namespace elastic::controller {
namespace {

constexpr const char* kComponent = "controller";

}  // namespace

Controller::Controller(ControllerConfig config, std::unique_ptr<Database> db, std::unique_ptr<SlurmAdapter> slurm)
    : config_(std::move(config)),
      db_(std::move(db)),
      slurm_(std::move(slurm)),
      roles_(SlurmRoleSources(slurm_.get()), config_.admin_cache_s),
      trigger_(config_.epoch_s, config_.event_min_gap_s) {
  paused_all_ = config_.paused;
  LoadState();
}

void Controller::SetConfig(ControllerConfig config) {
  bool pause_changed = config.paused != config_.paused;
  config_ = std::move(config);
  roles_.SetCacheSeconds(config_.admin_cache_s);
  trigger_.SetTimes(config_.epoch_s, config_.event_min_gap_s);
  if (pause_changed) paused_all_ = config_.paused;
}

void Controller::LoadState() {
  restarts_ = records::LoadRestarts(*db_);
  for (ElasticJob& job : records::LoadRunningJobs(*db_)) registry_.jobs[job.id] = std::move(job);
  for (Extension& e : records::LoadActiveExtensions(*db_)) registry_.extensions[e.id] = std::move(e);
  RestoreMoves();
  Log(LogLevel::kInfo, kComponent, "state loaded: ", registry_.jobs.size(), " running elastic jobs, ",
      registry_.extensions.size(), " extensions");
}

void Controller::SaveJob(const ElasticJob& job) { records::SaveJob(*db_, job, Now()); }

void Controller::SaveExtension(Extension& e) {
  if (e.id == 0) {
    e.id = records::InsertExtension(*db_, e);
  } else {
    records::UpdateExtension(*db_, e, Now());
  }
  if (e.Active()) {
    registry_.extensions[e.id] = e;
  } else {
    registry_.extensions.erase(e.id);
  }
}

int64_t Controller::QueueCommand(uint32_t job, const nlohmann::json& body) {
  return records::QueueCommand(*db_, job, body, Now());
}

void Controller::Audit(std::optional<uid_t> actor, const std::string& action, uint32_t job, const nlohmann::json& detail) {
  records::Audit(*db_, Now(), actor, action, job, detail);
  Log(LogLevel::kVerbose, kComponent, "audit: ", action, " job ", job, " ", detail.dump());
}

void Controller::SetGpus(ElasticJob& job, int gpus) { records::SetGpus(*db_, job.id, gpus, job.gpu_type, Now()); }

}  // namespace elastic::controller
