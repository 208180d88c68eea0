// Rank 0's commands: polled from elasticd (acknowledged by id, each carried out once) and from a
// command directory, turned into the decision of a rescale point, or taken from the standalone
// schedule; and the step metrics that go back to elasticd. docs/interfaces.md section 3.
#include "controller_commands.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "mpi_stack.h"
#include "relaunch.h"
#include "session_impl.h"

namespace elastic::mpi {

using detail::Clock;
using detail::kComponent;
using detail::Seconds;

// Parses one command object; kProtocol when malformed.
Result<Command> ParseCommand(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    Command c;
    c.action = j.at("action").get<std::string>();
    c.group = j.value("group", 0u);
    c.token = j.value("join_token", std::string());
    c.global_batch = j.value("global_batch", std::uint64_t{0});
    c.id = j.value("command", std::int64_t{0});
    if (c.action != "grow" && c.action != "shrink" && c.action != "set_batch" && c.action != "cancel_grow" &&
        c.action != "checkpoint" && c.action != "relaunch") {
      return Status(ErrorKind::kProtocol, "unknown command action '" + c.action + "'");
    }
    if (c.action == "relaunch") {
      auto ranks = RelaunchWorldRanks(j.value("world", nlohmann::json()));
      if (!ranks.ok()) return ranks.status();
      c.world = j.at("world").dump();
      c.world_ranks = ranks.value();
    }
    return c;
  } catch (const std::exception& e) {
    return Status(ErrorKind::kProtocol, std::string("malformed command: ") + e.what());
  }
}

void ControllerSink::OnStep(const StepMetrics& m) noexcept {
  try {
    const auto now = Clock::now();
    window_.Step(m.step_time_s, now);
    if (!window_.Due(now, interval_s_)) return;
    nlohmann::json msg{{"type", "metrics"},
                       {"step", m.step},
                       {"gpus", m.gpus},
                       {"global_batch", m.global_batch},
                       {"local_batch", m.local_batch},
                       {"accum_steps", 0},
                       {"grad_sqr", m.grad_sqr},
                       {"grad_var", m.grad_var},
                       {"samples", m.samples},
                       {"lr_factor", m.lr_factor}};
    if (window_.count() > 0) msg["step_time_s"] = window_.median();  // else progress alone
    if (total_samples_ > 0) msg["total_samples"] = static_cast<std::uint64_t>(total_samples_);
    link_->Call(std::move(msg));
    window_.Reported(now);
  } catch (...) {
  }
}

void ControllerSink::OnRescale(const std::string&, int, double) noexcept { window_.NewWorld(); }

// --- rank 0: poll, decide, acknowledge -------------------------------------------------------

// elasticd's pending commands; one delivered again (our ack was lost) is acknowledged again, not redone.
void Session::Impl::PollController() {
  for (const nlohmann::json& j : link->Poll()) {
    const std::int64_t id = j["command"].get<std::int64_t>();
    if (seen_commands.count(id)) {
      if (auto a = acks.find(id); a != acks.end()) link->Call(a->second);  // our ack was lost
      continue;
    }
    seen_commands.insert(id);
    auto cmd = ParseCommand(j.dump());
    if (!cmd.ok()) {
      Log(LogLevel::kWarning, kComponent, "ignoring command ", id, ": ", cmd.status().message());
      Command bad;
      bad.id = id;
      SendAck(bad, false, cmd.status().message());
      continue;
    }
    Log(LogLevel::kInfo, kComponent, "elasticd command ", id, ": ", cmd.value().action, " group ", cmd.value().group);
    pending.push_back(cmd.value());
  }
}

// At most every poll_interval_s, and only when nothing is pending: elasticd, then *.json files of the
// command directory (renamed *.json.done once read), oldest name first.
void Session::Impl::PollCommands() {
  if (options.command_dir.empty() && !link) return;
  if (pending.empty() == false) return;
  if (last_poll != Clock::time_point{} && Seconds(last_poll) < options.poll_interval_s) return;
  last_poll = Clock::now();
  if (link) PollController();
  if (options.command_dir.empty()) return;
  DIR* dir = opendir(options.command_dir.c_str());
  if (dir == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = options.command_dir + "/" + name;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    in.close();
    std::rename(path.c_str(), (path + ".done").c_str());
    auto cmd = ParseCommand(text.str());
    if (!cmd.ok()) {
      Log(LogLevel::kWarning, kComponent, "ignoring command file ", path, ": ", cmd.status().message());
      continue;
    }
    Log(LogLevel::kInfo, kComponent, "command ", cmd.value().action, " group ", cmd.value().group);
    pending.push_back(cmd.value());
  }
}

std::uint64_t Session::Impl::ClampBatch(std::uint64_t b) const {
  if (options.batch_min) b = std::max(b, *options.batch_min);
  if (options.batch_max) b = std::min(b, *options.batch_max);
  return b;
}

// Rank 0 at a rescale point: the first pending command that changes something, else what the
// standalone schedule asks for at this step.
Decision Session::Impl::Decide() {
  Decision d;
  if (options.rigid) return d;
  PollCommands();
  while (!pending.empty()) {
    Command c = pending.front();
    pending.erase(pending.begin());
    if (c.action == "checkpoint") {
      // Written at this rescale point (field 5 of its allreduce); acknowledged once written.
      checkpoint_requested = true;
      checkpoint_command = c;
      continue;
    }
    if (c.action == "cancel_grow") {
      // A grow whose extension failed is dropped if it has not started.
      std::erase_if(pending, [&](const Command& p) { return p.action == "grow" && p.group == c.group; });
      if (c.id > 0) SendAck(c, true, "");
      continue;
    }
    if (c.id > 0) current_command = c;
    if (c.global_batch != 0) d.global_batch = static_cast<std::int64_t>(ClampBatch(c.global_batch));
    if (c.action == "relaunch") {
      // Refused before the world stops where the launcher could not start it again, or where
      // groups launched by others (extension jobs' launchers) would end with it.
      std::string why;
      if (!stack::RelaunchesAcrossNodes() && nlohmann::json::parse(c.world).size() > 1) {
        why = std::string("this runtime (rendezvous ") + stack::RendezvousKind() +
              ") relaunches a world on the launcher's node only";
      } else if (groups.size() > 1) {
        why = "the world has joined groups (" + std::to_string(groups.size() - 1) +
              "), whose own launchers would end with it: they leave first";
      } else if (options.node_groups > 1) {
        why = "the job's world is " + std::to_string(options.node_groups) +
              " node groups started by their own launchers, which would end with it";
      } else if (options.spanned_nodes > 1) {
        why = "the job's world spans " + std::to_string(options.spanned_nodes) +
              " nodes whose launchers hold them until it ends";
      }
      if (!why.empty()) {
        Log(LogLevel::kError, kComponent, "relaunch refused: ", why);
        AckCurrent(false, why);
        d = Decision{};
        continue;
      }
      d.action = Action::kRelaunch;
      d.count = c.world_ranks;
      relaunch_world = c.world;
    } else if (c.action == "grow") {
      d.action = Action::kAccept;
      d.group = c.group;
      expected_token = c.token;  // used once (section 6)
    } else if (c.action == "shrink") {
      // Any joined group may leave (world_change.cpp); the base group (first) never does.
      const bool joined = std::any_of(groups.begin() + (groups.empty() ? 0 : 1), groups.end(),
                                      [&](const Group& g) { return g.id == c.group; });
      if (!joined) {
        const std::string why = "group " + std::to_string(c.group) + " is not a joined group of this world";
        Log(LogLevel::kError, kComponent, "shrink of group ", c.group, " refused: ", why);
        AckCurrent(false, why);
        d = Decision{};
        continue;
      } else {
        d.action = Action::kShrink;
        d.group = c.group;
      }
    } else if (d.global_batch != 0) {
      d.action = Action::kBatch;
    }
    if (d.action == Action::kNone) {  // nothing to change (e.g. the same batch again)
      AckCurrent(true, "");
      continue;
    }
    return d;
  }
  if (options.schedule.empty()) return d;
  const std::size_t index = static_cast<std::size_t>(
      std::min<std::uint64_t>(step / options.schedule_every, options.schedule.size() - 1));
  const ScheduleEntry& target = options.schedule[index];
  if (target.global_batch != 0 && target.global_batch != global_batch) {
    d.global_batch = static_cast<std::int64_t>(ClampBatch(target.global_batch));
  }
  if (target.world_size > size) {
    d.action = Action::kSpawn;
    d.count = target.world_size - size;
    d.group = next_group_id;
  } else if (target.world_size < size) {
    const Group& last_group = groups.back();
    if (groups.size() >= 2 && last_group.size <= size - target.world_size) {
      d.action = Action::kShrink;
      d.group = last_group.id;
    } else if (!warned_schedule) {
      warned_schedule = true;
      Log(LogLevel::kError, kComponent, "schedule asks for ", target.world_size, " ranks but the last group (",
          last_group.size, " ranks) cannot leave without going below it: staying at ", size);
    }
  }
  if (d.action == Action::kNone && d.global_batch != 0) d.action = Action::kBatch;
  return d;
}

// The ack of command c (kept, to be sent again if elasticd delivers c again).
void Session::Impl::SendAck(const Command& c, bool ok, const std::string& error) {
  nlohmann::json phases = last.phases;
  phases["pause_s"] = last.pause_s;
  nlohmann::json ack{{"type", "ack"}, {"command", c.id}, {"ok", ok}, {"error", error}, {"phases", phases},
                     {"gpus", size}, {"global_batch", global_batch}, {"lr_factor", LrFactorAt(global_batch)}};
  acks[c.id] = ack;
  if (link) link->Call(ack);
}
void Session::Impl::AckCurrent(bool ok, const std::string& error) {
  if (!current_command) return;
  if (current_command->id > 0) SendAck(*current_command, ok, error);
  current_command.reset();
}

void Session::Impl::PostponeCurrent() {
  if (!current_command) return;
  pending.insert(pending.begin(), *current_command);
  current_command.reset();
}

}  // namespace elastic::mpi
