// What a job's runtime receives when it polls (docs/interfaces.md section 3): its commands not yet
// acknowledged, in the order elasticd queued them, and the world of a relaunch as it is when the
// relaunch is sent.
//
// A relaunch goes alone: it is held back while a command queued before it is not acknowledged,
// and with it every command after it (the runtime carries them out in order). Its world is made
// when it is first sent, from the job's extensions as they are then: a grow queued before it may
// have failed, and its world must not name that group's node (relaunch_world.h).
//
// Groups join or leave by relaunch together: a relaunch stops and starts the whole world, so two
// groups submitted in one epoch (one per node) would pause the job twice. The first that is ready
// waits (at most extensions.relaunch_gather from its ready) for the job's other groups on their
// way, and the relaunches of the groups that are ready by then, queued one after the other, go as
// one command: its world brings them all in, its `groups` names them, and the commands folded
// into it are cancelled with `folded_into` (handlers.cpp, OnAck, finishes each group). Groups
// leaving in one epoch (queued together) leave in one relaunch the same way.
#include "controller.h"
#include "relaunch_world.h"
#include "elastic/common/log.h"

namespace elastic::controller {
namespace {
constexpr const char* kComponent = "controller";
}  // namespace

Result<nlohmann::json> Controller::RelaunchWorldFor(const ElasticJob& job, const std::set<int>& add,
                                                   const std::set<int>& drop) {
  if (job.leader_node.empty()) {
    return Status(ErrorKind::kUnavailable, "the job's node is not known yet (no epoch has seen the job since elasticd started)");
  }
  std::vector<RelaunchMember> members;
  for (const auto& [id, e] : registry_.extensions) {  // by id: the order they were submitted in
    if (e.parent != job.id || !job.relaunch_groups.count(e.group) || drop.count(e.group)) continue;
    if (add.count(e.group) || e.InWorld()) members.push_back({e.node, e.gpus, e.slurm_job});
  }
  return RelaunchWorld(job.leader_node, job.launcher.value("ranks", 0), members);
}

std::string Controller::RelaunchGatherWait(const ElasticJob& job, int group) const {
  const Extension* ready = nullptr;
  for (const auto& [id, e] : registry_.extensions) {
    if (e.parent == job.id && e.group == group) ready = &e;
  }
  if (ready == nullptr || ready->joining_at <= 0 || Now() - ready->joining_at >= config_.relaunch_gather_s) return "";
  for (const auto& [id, e] : registry_.extensions) {
    if (e.parent != job.id || e.group == group || !job.relaunch_groups.count(e.group)) continue;
    if (e.state == ExtState::kSubmitting || e.state == ExtState::kSubmitted || e.state == ExtState::kRegistered ||
        e.state == ExtState::kReady) {
      return "group " + std::to_string(e.group) + " (" + (e.node.empty() ? "its node not known yet" : e.node) +
             ", " + std::string(ExtStateName(e.state)) + ") is on its way";
    }
  }
  return "";
}

size_t Controller::RelaunchFold(const ElasticJob& job, const std::vector<records::OutstandingCommand>& commands,
                                size_t first, std::set<int>& groups) {
  const std::string op = commands[first].body.value("op", "");
  groups.insert(commands[first].body.value("group", 0));
  size_t last = first;
  while (last + 1 < commands.size()) {
    const records::OutstandingCommand& next = commands[last + 1];
    const int g = next.body.value("group", 0);
    if (next.delivered || next.body.value("action", "") != "relaunch" || next.body.value("op", "") != op ||
        groups.count(g)) {
      break;
    }
    if (op == "grow") {  // a group joins once it is ready
      const Extension* e = registry_.FindExtension(job.id, g);
      if (e == nullptr || e->state != ExtState::kJoining) break;
    }
    groups.insert(g);
    ++last;
  }
  return last;
}

nlohmann::json Controller::DeliverCommands(ElasticJob& job) {
  nlohmann::json out = nlohmann::json::array();
  const std::vector<records::OutstandingCommand> commands = records::OutstandingCommands(*db_, job.id);
  for (size_t i = 0; i < commands.size(); ++i) {
    nlohmann::json body = commands[i].body;
    if (!commands[i].delivered) {
      nlohmann::json sent;  // null: as queued
      if (body.value("action", "") == "relaunch") {
        if (i > 0) break;  // once every command before it is acknowledged
        const int group = body.value("group", 0);
        const bool grow = body.value("op", "") == "grow";
        if (grow) {
          if (const std::string wait = RelaunchGatherWait(job, group); !wait.empty()) {
            Log(LogLevel::kVerbose, kComponent, "job ", job.id, ": relaunch for group ", group, " waits: ", wait);
            break;
          }
        }
        // The relaunches of the same change queued right after it go with it.
        std::set<int> groups;
        const size_t last = RelaunchFold(job, commands, i, groups);
        auto world = grow ? RelaunchWorldFor(job, groups, {}) : RelaunchWorldFor(job, {}, groups);
        if (!world.ok()) {
          // Sent at a later poll; the group's deadline (ready_timeout, leave_timeout) ends it if
          // the world can never be made. Not yet known (no epoch since elasticd started) is no
          // fault: polls come every second, and the first epoch soon.
          Log(world.status().kind() == ErrorKind::kUnavailable ? LogLevel::kVerbose : LogLevel::kWarning, kComponent,
              "job ", job.id, ": relaunch for group ", group, " held back: its world cannot be made now: ",
              world.status().message());
          break;
        }
        body["world"] = world.value();
        if (last > i) {
          const nlohmann::json& final_cmd = commands[last].body;
          if (grow) {
            // Each group's rescale record passes on from the size the one before it brought
            // (a shrink's were queued so, in one epoch).
            int gpus = registry_.CurrentGpus(job);
            for (size_t j = i; j <= last; ++j) {
              const int g = commands[j].body.value("group", 0);
              const Extension* x = registry_.FindExtension(job.id, g);
              if (x == nullptr) continue;  // failed since it was queued: not in the world
              const int to = gpus + x->gpus;
              records::SetRescaleSizes(*db_, job.id, g, "grow", gpus, to);
              gpus = to;
            }
            auto planned_batch = job.grow_batch.find(gpus);
            body["gpus"] = gpus;
            body["global_batch"] =
                planned_batch != job.grow_batch.end() ? planned_batch->second : final_cmd.value("global_batch", job.batch);
          } else {
            body["gpus"] = final_cmd.value("gpus", body.value("gpus", 0));
            if (final_cmd.contains("global_batch")) body["global_batch"] = final_cmd["global_batch"];
          }
          body["groups"] = std::vector<int>(groups.begin(), groups.end());
          for (size_t j = i + 1; j <= last; ++j) records::FoldCommand(*db_, commands[j].id, commands[i].id, Now());
          Log(LogLevel::kInfo, kComponent, "job ", job.id, ": groups ", body["groups"].dump(),
              grow ? " join" : " leave", " in one relaunch (", body["gpus"].get<int>(), " GPUs)");
        }
        sent = body;
        records::MarkDelivered(*db_, commands[i].id, sent);
        body["command"] = commands[i].id;
        out.push_back(std::move(body));
        i = last;
        continue;
      }
      records::MarkDelivered(*db_, commands[i].id, sent);
    }
    body["command"] = commands[i].id;
    out.push_back(std::move(body));
  }
  return out;
}

}  // namespace elastic::controller
