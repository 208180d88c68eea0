// What a job's runtime receives when it polls (docs/interfaces.md section 3): its commands not yet
// acknowledged, in the order elasticd queued them, and the world of a relaunch as it is when the
// relaunch is sent.
//
// A relaunch goes alone: it is held back while a command queued before it is not acknowledged,
// and with it every command after it (the runtime carries them out in order). Its world is made
// when it is first sent, from the job's extensions as they are then: a grow queued before it may
// have failed, and its world must not name that group's node (relaunch_world.h).
#include "controller.h"
#include "relaunch_world.h"
#include "elastic/common/log.h"

namespace elastic::controller {
namespace {
constexpr const char* kComponent = "controller";
}  // namespace

Result<nlohmann::json> Controller::RelaunchWorldFor(const ElasticJob& job, int add, int drop) {
  if (job.leader_node.empty()) {
    return Status(ErrorKind::kUnavailable, "the job's node is not known yet (no epoch has seen the job since elasticd started)");
  }
  std::vector<RelaunchMember> members;
  for (const auto& [id, e] : registry_.extensions) {  // by id: the order they were submitted in
    if (e.parent != job.id || !job.relaunch_groups.count(e.group) || e.group == drop) continue;
    if (e.group == add || e.InWorld()) members.push_back({e.node, e.gpus, e.slurm_job});
  }
  return RelaunchWorld(job.leader_node, job.launcher.value("ranks", 0), members);
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
        auto world = RelaunchWorldFor(job, grow ? group : 0, grow ? 0 : group);
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
        sent = body;
      }
      records::MarkDelivered(*db_, commands[i].id, sent);
    }
    body["command"] = commands[i].id;
    out.push_back(std::move(body));
  }
  return out;
}

}  // namespace elastic::controller
