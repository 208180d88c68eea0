// Moving a job to another GPU type it accepts (--elastic-gpu-types): the rule is CheckMove
// (type_moves.h); here its steps. The job writes a checkpoint on command; elasticd requeues it
// held (Slurm ends it); once Slurm has finished ending it, elasticd excludes the nodes without the
// new type, sets its begin time to now and releases it; the job restarts at its base size on the
// new type, resumes from its checkpoint and registers again, with what elasticd knew of it.
// Slurm 22.05 cannot change the GPU type a pending job's --gres names (an update adds the new type
// beside the old one), so only jobs whose request is untyped (--gres=gpu:N) are moved.
#include <algorithm>
#include <numeric>

#include "controller.h"
#include "elastic/common/log.h"
#include "type_moves.h"

namespace elastic::controller {
namespace {

constexpr const char* kComponent = "controller";

const char* PhaseName(int phase) {
  switch (phase) {
    case 0: return "checkpoint";
    case 1: return "requeued";
    default: return "released";
  }
}

}  // namespace

nlohmann::json Controller::MoveJson(const Move& m) {
  return {{"from", m.from}, {"to", m.to}, {"phase", PhaseName(static_cast<int>(m.phase))},
          {"started_at", m.started_at}, {"check", m.check}};
}

void Controller::RestoreMoves() {
  auto restore = [&](const ElasticJob& job) {
    const Json& j = job.move;
    Move m;
    m.from = j.value("from", "");
    m.to = j.value("to", "");
    m.phase = j.value("phase", "") == "released" ? Move::Phase::kReleased : Move::Phase::kRequeued;
    m.started_at = j.value("started_at", 0.0);
    m.check = j.value("check", Json::object());
    return m;
  };
  for (const auto& [id, job] : registry_.jobs) {
    if (job.move.is_object()) moves_[id] = restore(job);  // requeued; the next epoch sees it pending
  }
  for (ElasticJob& job : records::LoadMovingJobs(*db_)) {
    if (!job.move.is_object()) continue;
    Move m = restore(job);
    m.job = std::move(job);
    moves_[m.job.id] = std::move(m);
  }
  if (!moves_.empty()) Log(LogLevel::kInfo, kComponent, moves_.size(), " moves to another GPU type in flight");
}

void Controller::SaveMove(Move& m) {
  m.job.state = "moving";
  m.job.move = MoveJson(m);
  SaveJob(m.job);
}

void Controller::EndMove(uint32_t id, Move& m) {
  if (auto r = registry_.jobs.find(id); r != registry_.jobs.end()) {
    r->second.move = nullptr;
    // No new move (nor growth) at once: a failing move would otherwise be tried every epoch.
    r->second.grow_backoff_until = Now() + std::max(config_.min_rescale_interval_s, 5 * config_.epoch_s);
    SaveJob(r->second);
  } else if (m.job.id != 0) {
    m.job.state = "ended";
    m.job.move = nullptr;
    SaveJob(m.job);
  }
}

double Controller::MoveCostS() const {
  if (move_costs_.empty()) return config_.move_cost_s;
  return std::accumulate(move_costs_.begin(), move_costs_.end(), 0.0) / static_cast<double>(move_costs_.size());
}

void Controller::OnMoveCheckpoint(ElasticJob& job, int64_t command, bool ok, const std::string& error) {
  auto it = moves_.find(job.id);
  if (it == moves_.end() || it->second.phase != Move::Phase::kCheckpoint || it->second.command != command) return;
  Status s = ok ? (slurm_ != nullptr ? slurm_->RequeueHold(job.id) : Status(ErrorKind::kUnavailable, "no Slurm"))
                : Status(ErrorKind::kUnavailable, "the checkpoint failed: " + error);
  if (!s.ok()) {
    Log(LogLevel::kWarning, kComponent, "job ", job.id, ": move to ", it->second.to, " given up: ", s.message());
    Audit(std::nullopt, "move_failed", job.id, {{"to", it->second.to}, {"why", s.message()}});
    EndMove(job.id, it->second);
    moves_.erase(it);
    return;
  }
  it->second.phase = Move::Phase::kRequeued;
  job.move = MoveJson(it->second);  // a restarted elasticd finishes the move
  SaveJob(job);
  Audit(std::nullopt, "move_requeued", job.id, {{"to", it->second.to}});
  Log(LogLevel::kInfo, kComponent, "job ", job.id, ": checkpoint written, requeued held to move to ", it->second.to);
  NotifyEvent("job " + std::to_string(job.id) + " requeued for a move");
}

bool Controller::EndForMove(ElasticJob& job) {
  auto it = moves_.find(job.id);
  if (it == moves_.end()) return false;
  if (it->second.phase == Move::Phase::kCheckpoint) {  // it ended before its checkpoint: no move
    Audit(std::nullopt, "move_failed", job.id, {{"to", it->second.to}, {"why", "the job ended first"}});
    moves_.erase(it);
    return false;
  }
  it->second.job = job;
  EndJob(job, "requeued to move to GPU type " + it->second.to);  // `job` is gone after this
  SaveMove(it->second);  // state 'moving' until it registers on the new type
  return true;
}

void Controller::AdvanceMoves(const std::vector<NodeInfo>& nodes, const std::map<uint32_t, const JobInfo*>& by_id,
                              double now) {
  for (auto it = moves_.begin(); it != moves_.end();) {
    const uint32_t id = it->first;
    Move& m = it->second;
    auto jit = by_id.find(id);
    const JobInfo* j = jit == by_id.end() ? nullptr : jit->second;
    std::string failed;
    if (m.phase == Move::Phase::kCheckpoint && now - m.started_at > config_.ready_timeout_s) {
      failed = "no checkpoint within extensions.ready_timeout";
      records::CancelCommands(*db_, id);
    } else if (m.phase != Move::Phase::kCheckpoint && (j == nullptr || j->state == SlurmJobState::kEnded)) {
      failed = "the job left Slurm's queue";
    } else if (m.phase == Move::Phase::kRequeued && j->state == SlurmJobState::kPending && !j->completing &&
               slurm_ != nullptr) {
      const std::string exclude = NodesWithout(nodes, m.to);
      Status s = slurm_->ReleaseExcluding(id, exclude);
      if (s.ok()) {
        m.phase = Move::Phase::kReleased;
        if (m.job.id != 0) SaveMove(m);
        Audit(std::nullopt, "move_released", id, {{"to", m.to}, {"excluded_nodes", exclude}});
        Log(LogLevel::kInfo, kComponent, "job ", id, ": released to restart on ", m.to, " (nodes excluded: ", exclude, ")");
      } else {
        Log(LogLevel::kWarning, kComponent, "job ", id, ": cannot release it toward ", m.to, ": ", s.message(),
            " (tried again next epoch)");
      }
    }
    if (!failed.empty()) {
      Log(LogLevel::kWarning, kComponent, "job ", id, ": move to ", m.to, " given up: ", failed);
      Audit(std::nullopt, "move_failed", id, {{"to", m.to}, {"why", failed}});
      EndMove(id, m);
      it = moves_.erase(it);
      continue;
    }
    ++it;
  }
}

std::optional<ElasticJob> Controller::FinishMove(uint32_t id, const std::string& type, double now) {
  auto it = moves_.find(id);
  if (it == moves_.end() || it->second.phase == Move::Phase::kCheckpoint) return std::nullopt;
  Move m = std::move(it->second);
  moves_.erase(it);
  ElasticJob job = std::move(m.job);
  job.move = nullptr;
  SwitchTypeSamples(job, m.from, type);
  const double cost = now - m.started_at;
  move_costs_.push_back(cost);
  if (move_costs_.size() > 20) move_costs_.erase(move_costs_.begin());
  Audit(std::nullopt, "moved", id, {{"from", m.from}, {"to", type}, {"wanted", m.to}, {"cost_s", cost}});
  Log(LogLevel::kInfo, kComponent, "job ", id, ": moved from ", m.from, " to ", type, " in ", static_cast<int>(cost), " s");
  return job;
}

nlohmann::json Controller::MovesJson() const {
  Json out = Json::array();
  for (const auto& [id, m] : moves_) {
    out.push_back({{"job_id", id}, {"uid", m.phase == Move::Phase::kCheckpoint ? 0u : m.job.uid}, {"from", m.from}, {"to", m.to}, {"phase", PhaseName(static_cast<int>(m.phase))},
                   {"started_at", m.started_at}, {"check", m.check}});
  }
  return out;
}

}  // namespace elastic::controller
