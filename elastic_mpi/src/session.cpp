// The session: world communicator, rescale points, state hand-over, batch and lr bookkeeping.
// docs/runtime.md describes the protocol; the comments here say why each step is the way it is.
#include "elastic_mpi/session.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "check.h"
#include "elastic_mpi/join.h"
#include "elastic_mpi/sharding.h"
#include "elastic_mpi/topology.h"
#include "controller_link.h"
#include "watchdog.h"

namespace elastic::mpi {

namespace {

constexpr std::string_view kComponent = "elastic_mpi";

// Set by SIGTERM (scancel, preemption with a grace time): the rank's group leaves at the next
// rescale point. A signal handler may only touch a sig_atomic_t.
volatile std::sig_atomic_t g_terminate = 0;
extern "C" void OnTerminate(int) { g_terminate = 1; }
// Set by SIGUSR1 (Slurm's time-limit warning): checkpoint at the next rescale point, go on.
volatile std::sig_atomic_t g_checkpoint = 0;
extern "C" void OnCheckpointSignal(int) { g_checkpoint = 1; }
constexpr int kTagJoinRecord = 7301;
constexpr int kTagJoinVerdict = 7302;

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The decision rank 0 takes at a rescale point, shared with every rank by one MAX-allreduce
// (rank 0 contributes the decision, the others zeros), so a step boundary costs one small
// collective.
enum class Action : std::int64_t { kNone = 0, kSpawn = 1, kShrink = 2, kAccept = 3, kBatch = 4 };
struct Decision {
  Action action = Action::kNone;
  std::int64_t count = 0;         // ranks to spawn
  std::int64_t group = 0;         // group that joins or leaves
  std::int64_t global_batch = 0;  // new global batch after the change (0: unchanged)
};

// A pending command from a command file or from elasticd (id > 0: acknowledge it).
struct Command {
  std::string action;  // grow, shrink, set_batch, cancel_grow, checkpoint
  std::uint32_t group = 0;
  std::string token;
  std::uint64_t global_batch = 0;
  std::int64_t id = 0;  // elasticd's command id; 0 for command files
};

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
        c.action != "checkpoint") {
      return Status(ErrorKind::kProtocol, "unknown command action '" + c.action + "'");
    }
    return c;
  } catch (const std::exception& e) {
    return Status(ErrorKind::kProtocol, std::string("malformed command: ") + e.what());
  }
}

// The program and arguments of this process, for MPI_Comm_spawn.
std::vector<std::string> OwnCommandLine() {
  std::vector<std::string> argv;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(in, arg, '\0')) argv.push_back(arg);
  std::array<char, 4096> exe{};
  const ssize_t n = readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (n > 0 && !argv.empty()) argv[0].assign(exe.data(), static_cast<std::size_t>(n));
  return argv;
}

// Step metrics to elasticd, at most every `interval_s` (the mean step time of the window).
class ControllerSink final : public MetricsSink {
 public:
  ControllerSink(ControllerLink* link, double interval_s, double total_samples)
      : link_(link), interval_s_(interval_s), total_samples_(total_samples) {}
  void OnStep(const StepMetrics& m) noexcept override {
    try {
      sum_ += m.step_time_s;
      ++count_;
      if (count_ > 0 && Seconds(last_) < interval_s_) return;
      last_ = Clock::now();
      nlohmann::json msg{{"type", "metrics"},
                         {"step", m.step},
                         {"gpus", m.gpus},
                         {"global_batch", m.global_batch},
                         {"local_batch", m.local_batch},
                         {"accum_steps", 0},
                         {"step_time_s", sum_ / static_cast<double>(count_)},
                         {"grad_sqr", m.grad_sqr},
                         {"grad_var", m.grad_var},
                         {"samples", m.samples},
                         {"lr_factor", m.lr_factor}};
      if (total_samples_ > 0) msg["total_samples"] = static_cast<std::uint64_t>(total_samples_);
      link_->Call(std::move(msg));
      sum_ = 0;
      count_ = 0;
    } catch (...) {
    }
  }
  void OnRescale(const std::string&, int, double) noexcept override {
    sum_ = 0;  // a new size: do not mix step times of two sizes
    count_ = 0;
  }

 private:
  ControllerLink* link_;
  double interval_s_;
  double total_samples_;
  Clock::time_point last_ = Clock::now();
  double sum_ = 0;
  int count_ = 0;
};

// The backend the program gets: every collective under the session's collective guard, so a
// dead peer stops the job with a clear error instead of a silent hang.
class GuardedBackend final : public CollectiveBackend {
 public:
  GuardedBackend(std::unique_ptr<CollectiveBackend> inner, detail::CollectiveGuard* guard, const std::uint64_t* step)
      : inner_(std::move(inner)), guard_(guard), step_(step) {}
  std::string_view name() const noexcept override { return inner_->name(); }
  MemorySpace memory_space() const noexcept override { return inner_->memory_space(); }
  Status AllreduceSum(float* data, std::size_t count) override {
    detail::GuardScope scope(guard_, "an allreduce of the training step", *step_);
    return inner_->AllreduceSum(data, count);
  }
  Status AllreduceSum(double* data, std::size_t count) override {
    detail::GuardScope scope(guard_, "an allreduce of the training step", *step_);
    return inner_->AllreduceSum(data, count);
  }
  Status Broadcast(void* data, std::size_t bytes, int root) override {
    detail::GuardScope scope(guard_, "a broadcast of the training step", *step_);
    return inner_->Broadcast(data, bytes, root);
  }
  Status Shrink(MPI_Comm world, std::span<const int> leaving) override { return inner_->Shrink(world, leaving); }
  Status Grow(MPI_Comm world, int newcomers) override { return inner_->Grow(world, newcomers); }

 private:
  std::unique_ptr<CollectiveBackend> inner_;
  detail::CollectiveGuard* guard_;
  const std::uint64_t* step_;
};

struct Buffer {
  std::string name;
  void* data;
  std::size_t bytes;
};

// One group of the world, in join order. inter is this rank's handle of the inter-communicator
// between the group and the world it joined (MPI_COMM_NULL for the base group and for groups
// that joined before this rank did).
struct Group {
  std::uint32_t id = 0;
  int size = 0;
  MPI_Comm inter = MPI_COMM_NULL;
};

Status BcastBytes(void* data, std::size_t bytes, int root, MPI_Comm comm) {
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  auto* p = static_cast<char*>(data);
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(kChunk, bytes - done);
    ELASTIC_MPI_CHECK(MPI_Bcast(p + done, static_cast<int>(n), MPI_BYTE, root, comm));
    done += n;
  }
  return Status::Ok();
}

// Broadcast of a string: length, then bytes.
Status BcastString(std::string* s, int root, MPI_Comm comm, bool receiving) {
  std::uint64_t len = receiving ? 0 : s->size();
  ELASTIC_MPI_CHECK(MPI_Bcast(&len, 1, MPI_UINT64_T, root, comm));
  if (receiving) s->resize(len);
  return BcastBytes(s->data(), len, root, comm);
}

}  // namespace

Result<std::vector<ScheduleEntry>> ParseSchedule(std::string_view text) {
  std::vector<ScheduleEntry> out;
  if (text.empty()) return out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t arrow = text.find("->", pos);
    const std::string item(text.substr(pos, arrow == std::string_view::npos ? text.npos : arrow - pos));
    ScheduleEntry e;
    char extra = 0;
    long long size = 0;
    unsigned long long batch = 0;
    const int n = std::sscanf(item.c_str(), "%lld:%llu%c", &size, &batch, &extra);
    const bool only_size = item.find(':') == std::string::npos &&
                           std::sscanf(item.c_str(), "%lld%c", &size, &extra) == 1;
    if (!(only_size || n == 2) || size < 1 || size > 1 << 20 || (n == 2 && batch < 1)) {
      return Status(ErrorKind::kInvalidArgument,
                    "bad schedule entry '" + item + "' (expected SIZE or SIZE:GLOBAL_BATCH)");
    }
    e.world_size = static_cast<int>(size);
    e.global_batch = only_size ? 0 : batch;
    out.push_back(e);
    if (arrow == std::string_view::npos) break;
    pos = arrow + 2;
  }
  return out;
}

Result<SessionOptions> SessionOptions::FromConfig(const Config& config) {
  SessionOptions o;
  auto boolean = [&](std::string_view name, bool* out) -> Status {
    auto r = config.GetBool(name);
    if (!r.ok()) return r.status();
    *out = r.value();
    return Status::Ok();
  };
  auto number = [&](std::string_view name, double* out) -> Status {
    auto r = config.GetDouble(name);
    if (!r.ok()) return r.status();
    *out = r.value();
    return Status::Ok();
  };
  auto optional_u64 = [&](std::string_view name, std::optional<std::uint64_t>* out) -> Status {
    if (config.Get(name).empty()) return Status::Ok();
    auto r = config.GetInt(name);
    if (!r.ok()) return r.status();
    if (r.value() < 1) return Status(ErrorKind::kConfig, std::string(name) + " must be >= 1");
    *out = static_cast<std::uint64_t>(r.value());
    return Status::Ok();
  };
  for (Status s : {boolean("standalone", &o.standalone), boolean("join", &o.join),
                   boolean("bind", &o.bind), boolean("hierarchical", &o.hierarchical_allreduce), number("spawn_timeout_s", &o.spawn_timeout_s),
                   number("connect_timeout_s", &o.connect_timeout_s),
                   number("collective_timeout_s", &o.collective_timeout_s),
                   number("checkpoint_interval_s", &o.checkpoint_interval_s),
                   number("total_samples", &o.total_samples),
                   number("respawn_delay_s", &o.respawn_delay_s),
                   number("poll_interval_s", &o.poll_interval_s),
                   number("grad_noise_ema", &o.grad_noise_smoothing),
                   optional_u64("batch_min", &o.batch_min), optional_u64("batch_max", &o.batch_max)}) {
    if (!s.ok()) return s;
  }
  const std::string mode = config.Get("mode");
  if (mode != "elastic" && mode != "rigid") {
    return Status(ErrorKind::kConfig, "ELASTIC_MODE='" + mode + "' is not elastic or rigid");
  }
  o.rigid = mode == "rigid";
  o.job_id = config.Get("job_id");
  auto group = config.GetInt("group_id");
  if (!group.ok()) return group.status();
  if (group.value() < 0 || group.value() > UINT32_MAX) {
    return Status(ErrorKind::kConfig, "ELASTIC_GROUP_ID out of range");
  }
  o.group_id = static_cast<std::uint32_t>(group.value());
  if (!(o.total_samples >= 0) || o.total_samples > 1e18) {
    return Status(ErrorKind::kConfig, "ELASTIC_TOTAL_SAMPLES must be a number of samples >= 0");
  }
  auto node_group = config.GetInt("node_group");
  if (!node_group.ok()) return node_group.status();
  auto node_groups = config.GetInt("node_groups");
  if (!node_groups.ok()) return node_groups.status();
  if (node_groups.value() < 1 || node_groups.value() > 65536) {
    return Status(ErrorKind::kConfig, "ELASTIC_NODE_GROUPS must be between 1 and 65536");
  }
  if (node_group.value() < 0 || node_group.value() >= node_groups.value()) {
    return Status(ErrorKind::kConfig, "ELASTIC_NODE_GROUP=" + std::to_string(node_group.value()) +
                                          " is not below ELASTIC_NODE_GROUPS=" + std::to_string(node_groups.value()));
  }
  o.node_group = static_cast<int>(node_group.value());
  o.node_groups = static_cast<int>(node_groups.value());
  o.join_token = config.Get("join_token");
  o.command_dir = config.Get("command_dir");
  o.controller = config.Get("controller");
  o.munge_socket = config.Get("munge_socket");
  if (auto mi = config.GetDouble("metrics_interval_s"); mi.ok()) {
    o.metrics_interval_s = mi.value();
  } else {
    return mi.status();
  }
  o.metrics_file = config.Get("metrics_file");
  o.checkpoint_dir = config.Get("checkpoint_dir");
  o.run_dir = config.Get("run_dir");
  auto rule = ParseLrRule(config.Get("lr_scaling"));
  if (!rule.ok()) return Status(ErrorKind::kConfig, "ELASTIC_LR_SCALING: " + rule.status().message());
  o.lr_rule = rule.value();
  auto backend = ParseBackendKind(config.Get("backend"));
  if (!backend.ok()) return Status(ErrorKind::kConfig, "ELASTIC_BACKEND: " + backend.status().message());
  o.backend = backend.value();
  auto schedule = ParseSchedule(config.Get("schedule"));
  if (!schedule.ok()) return Status(ErrorKind::kConfig, "ELASTIC_SCHEDULE: " + schedule.status().message());
  o.schedule = schedule.value();
  auto every = config.GetInt("schedule_every");
  if (!every.ok()) return every.status();
  if (every.value() < 1) return Status(ErrorKind::kConfig, "ELASTIC_SCHEDULE_EVERY must be >= 1");
  o.schedule_every = static_cast<std::uint64_t>(every.value());
  if (auto level = ParseLogLevel(config.Get("log_level"))) {
    Logger::Get().SetLevel(*level);
  } else {
    return Status(ErrorKind::kConfig, "ELASTIC_LOG_LEVEL='" + config.Get("log_level") + "' is not a log level");
  }
  if (o.join && !o.standalone && o.join_token.empty()) {
    return Status(ErrorKind::kConfig, "ELASTIC_JOIN=1 needs ELASTIC_JOIN_TOKEN");
  }
  if (o.node_groups > 1 && !o.join && o.join_token.empty()) {
    return Status(ErrorKind::kConfig, "ELASTIC_NODE_GROUPS > 1 needs ELASTIC_JOIN_TOKEN (the job's initial token)");
  }
  return o;
}

Result<SessionOptions> SessionOptions::FromEnvironment() {
  return FromConfig(Config::FromEnvironment());
}

// ---------------------------------------------------------------------------------------------

struct Session::Impl {
  SessionOptions options;
  bool own_mpi = false;
  bool newcomer = false;
  bool left = false;
  bool begun = false;
  bool joined_at_point = false;
  bool stop = false;         // SIGTERM on the base group: every rank stops
  bool warned_term = false;  // a newcomer's first RescalePoint() is the parents' current one
  MPI_Comm world = MPI_COMM_NULL;
  int rank = 0;
  int size = 0;
  std::uint32_t group_id = 0;
  std::vector<Group> groups;
  std::uint32_t next_group_id = 1;  // for spawned groups (rank 0's copy is authoritative)
  std::uint64_t step = 0;
  std::uint64_t samples = 0;
  std::uint64_t global_batch = 0;
  std::uint64_t base_batch = 0;
  GradientNoise noise;
  std::vector<Buffer> buffers;
  std::unique_ptr<CollectiveBackend> backend;
  std::vector<std::shared_ptr<MetricsSink>> sinks;
  RescaleInfo last;
  Clock::time_point last_shrink{};
  bool shrunk_before = false;
  // Rank 0 only: commands read from the command directory, oldest first.
  std::vector<Command> pending;
  Clock::time_point last_poll{};
  std::string pending_meta;  // a newcomer's meta, applied in Begin()
  // Inter-communicators between the base job's node groups (never disconnected: the base job
  // never leaves; MPI_Finalize cleans them up).
  std::vector<MPI_Comm> base_links;
  std::vector<int> node_group_sizes;  // ranks of each initial node group, in world rank order
  std::unique_ptr<detail::CollectiveGuard> guard;
  bool checkpoint_requested = false;  // rank 0: a checkpoint command is pending
  std::optional<Command> checkpoint_command;
  int checkpoints_written = 0;
  Clock::time_point last_checkpoint = Clock::now();  // rank 0: for checkpoint_interval_s
  MPI_Comm pending_inter = MPI_COMM_NULL;  // a newcomer's link to the parents, for Begin()

  explicit Impl(SessionOptions o) : options(std::move(o)), noise(options.grad_noise_smoothing) {}

  Status UpdateRankSize() {
    ELASTIC_MPI_CHECK(MPI_Comm_rank(world, &rank));
    ELASTIC_MPI_CHECK(MPI_Comm_size(world, &size));
    return Status::Ok();
  }

  // --- meta: what a newcomer needs besides the registered buffers --------------------------
  std::string MetaJson(std::uint32_t new_group) const {
    nlohmann::json j;
    j["step"] = step;
    j["samples"] = samples;
    j["global_batch"] = global_batch;
    j["base_batch"] = base_batch;
    j["next_group_id"] = next_group_id;
    j["new_group"] = new_group;
    const auto m = noise.moments();
    j["noise"] = {m.sqr, m.var, m.steps};
    j["groups"] = nlohmann::json::array();
    for (const Group& g : groups) j["groups"].push_back({g.id, g.size});
    j["buffers"] = nlohmann::json::array();
    for (const Buffer& b : buffers) j["buffers"].push_back({b.name, b.bytes});
    return j.dump();
  }

  // Applies the meta on a newcomer, with its own group appended (its inter is `inter`).
  Status ApplyMeta(const std::string& text, MPI_Comm inter) {
    try {
      const auto j = nlohmann::json::parse(text);
      step = j.at("step").get<std::uint64_t>();
      samples = j.at("samples").get<std::uint64_t>();
      global_batch = j.at("global_batch").get<std::uint64_t>();
      base_batch = j.at("base_batch").get<std::uint64_t>();
      next_group_id = j.at("next_group_id").get<std::uint32_t>();
      group_id = j.at("new_group").get<std::uint32_t>();
      const auto& n = j.at("noise");
      noise.Restore({n.at(0).get<double>(), n.at(1).get<double>(), n.at(2).get<double>()});
      groups.clear();
      for (const auto& g : j.at("groups")) {
        groups.push_back({g.at(0).get<std::uint32_t>(), g.at(1).get<int>(), MPI_COMM_NULL});
      }
      int remote = 0;
      ELASTIC_MPI_CHECK(MPI_Comm_remote_size(inter, &remote));
      int local = 0;
      ELASTIC_MPI_CHECK(MPI_Comm_size(inter, &local));
      // On the newcomer's side, the inter-communicator's local group is the newcomer group.
      groups.push_back({group_id, local, inter});
      (void)remote;
      // Manifest check happens in Begin(), once the program has registered its buffers.
      pending_manifest = j.at("buffers");
    } catch (const std::exception& e) {
      return Status(ErrorKind::kProtocol, std::string("malformed session meta: ") + e.what());
    }
    return Status::Ok();
  }
  nlohmann::json pending_manifest;

  // --- state hand-over over the inter-communicator: parents' rank 0 is the root -------------
  Status SendState(MPI_Comm inter, std::uint32_t new_group) {
    const int root = rank == 0 ? MPI_ROOT : MPI_PROC_NULL;
    std::string meta = MetaJson(new_group);
    if (Status s = BcastString(&meta, root, inter, false); !s.ok()) return s;
    for (Buffer& b : buffers) {
      if (Status s = BcastBytes(b.data, b.bytes, root, inter); !s.ok()) return s;
    }
    return Status::Ok();
  }

  Status ReceiveState(MPI_Comm inter) {
    // Every registered buffer must match rank 0's, in order.
    const auto& manifest = pending_manifest;
    bool match = manifest.size() == buffers.size();
    for (std::size_t i = 0; match && i < buffers.size(); ++i) {
      match = manifest[i].at(0).get<std::string>() == buffers[i].name &&
              manifest[i].at(1).get<std::size_t>() == buffers[i].bytes;
    }
    if (!match) {
      std::string mine;
      for (const Buffer& b : buffers) mine += b.name + ":" + std::to_string(b.bytes) + " ";
      return Status(ErrorKind::kInternal, "registered state differs from rank 0's: rank 0 has " +
                                              manifest.dump() + ", this rank has " + mine);
    }
    for (Buffer& b : buffers) {
      if (Status s = BcastBytes(b.data, b.bytes, 0, inter); !s.ok()) return s;
    }
    return Status::Ok();
  }

  // Replaces the world by `merged` (freeing the old one) and updates rank and size.
  Status AdoptWorld(MPI_Comm merged) {
    if (world != MPI_COMM_NULL) ELASTIC_MPI_CHECK(MPI_Comm_free(&world));
    world = merged;
    return UpdateRankSize();
  }

  // Collective over the new world, identical on parents and newcomers: bind to this rank's share
  // of the node, then bring the collective backend to the new world: created at the start; after
  // a grow (newcomers > 0: the world's last ranks) the parents' backend grows in place and the
  // newcomers' joins it (backend.h).
  Status AfterWorldChange(int newcomers = 0) {
    if (options.bind) Bind();
    int local_rank = 0;
    MPI_Comm node = MPI_COMM_NULL;
    ELASTIC_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    if (newcomers > 0 && backend) return backend->Grow(world, newcomers);
    backend.reset();
    // Ranks of one MPI launch (a node group of the base job, a spawned or joined group) share a
    // key: the MPI backend then reduces over shared memory within each launch first.
    const int key = group_id == 0 ? options.node_group : 65536 + static_cast<int>(group_id);
    auto made = newcomers > 0 ? JoinGrownBackend(world, newcomers, local_rank, key)
                              : MakeBackend(options.backend, world, local_rank, options.hierarchical_allreduce ? key : -1);
    if (!made.ok()) return made.status();
    backend = std::make_unique<GuardedBackend>(std::move(made).value(), guard.get(), &step);
    return Status::Ok();
  }

  // Binds this rank to its share of the node, counting every rank of the world on this node.
  void Bind() {
    MPI_Comm node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS) return;
    int node_rank = 0;
    int node_size = 1;
    MPI_Comm_rank(node, &node_rank);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    auto bound = BindToShare(node_rank, node_size);
    if (bound.ok()) {
      Log(LogLevel::kDebug, kComponent, "rank ", rank, " bound to cores ", bound.value());
    } else {
      Log(LogLevel::kVerbose, kComponent, "binding skipped: ", bound.status().message());
    }
  }

  // --- rank 0's decision -------------------------------------------------------------------
  void PollController() {
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

  void PollCommands() {
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

  // The learning-rate factor of the job's rule at global batch b (section "Learning-rate rules").
  double LrFactorAt(std::uint64_t b) const {
    return LrFactor(options.lr_rule, static_cast<double>(b), static_cast<double>(base_batch), noise);
  }

  std::uint64_t ClampBatch(std::uint64_t b) const {
    if (options.batch_min) b = std::max(b, *options.batch_min);
    if (options.batch_max) b = std::min(b, *options.batch_max);
    return b;
  }

  Decision Decide() {
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
      if (c.action == "grow") {
        d.action = Action::kAccept;
        d.group = c.group;
        expected_token = c.token;  // used once (section 6)
      } else if (c.action == "shrink") {
        if (groups.size() < 2 || groups.back().id != c.group) {
          Log(LogLevel::kError, kComponent, "shrink of group ", c.group,
              " refused: only the most recently joined group can leave");
          AckCurrent(false, "only the most recently joined group can leave");
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
  std::string expected_token;
  bool warned_schedule = false;

  // --- elasticd (rank 0) ------------------------------------------------------------------------
  std::unique_ptr<ControllerLink> link;
  std::uint32_t signalled_leave = 0;           // group that left on SIGTERM at this point
  std::optional<Command> current_command;      // the controller command being carried out
  std::set<std::int64_t> seen_commands;        // delivered again until acknowledged: do each once
  std::map<std::int64_t, nlohmann::json> acks;  // sent acks, re-sent when a command comes again

  void SendAck(const Command& c, bool ok, const std::string& error) {
    nlohmann::json phases = last.phases;
    phases["pause_s"] = last.pause_s;
    nlohmann::json ack{{"type", "ack"}, {"command", c.id}, {"ok", ok}, {"error", error}, {"phases", phases},
                       {"gpus", size}, {"global_batch", global_batch}, {"lr_factor", LrFactorAt(global_batch)}};
    acks[c.id] = ack;
    if (link) link->Call(ack);
  }
  void AckCurrent(bool ok, const std::string& error) {
    if (!current_command) return;
    if (current_command->id > 0) SendAck(*current_command, ok, error);
    current_command.reset();
  }

  // --- the changes ---------------------------------------------------------------------------
  Status Spawn(int count, std::uint32_t new_group) {
    if (shrunk_before && options.respawn_delay_s > 0) {
      // Spawning right after leavers exit can hang in PMIx (openpmix issue 2735): wait a little.
      const double wait = options.respawn_delay_s - Seconds(last_shrink);
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
    std::vector<std::string> command = options.spawn_command.empty() ? OwnCommandLine() : options.spawn_command;
    if (command.empty()) return Status(ErrorKind::kInternal, "no command line to spawn");
    std::vector<char*> args;
    for (std::size_t i = 1; i < command.size(); ++i) args.push_back(command[i].data());
    args.push_back(nullptr);
    auto t = Clock::now();
    MPI_Comm inter = MPI_COMM_NULL;
    std::vector<int> errcodes(static_cast<std::size_t>(count), MPI_SUCCESS);
    {
      detail::Watchdog watchdog("MPI_Comm_spawn of " + std::to_string(count) + " ranks", options.spawn_timeout_s);
      ELASTIC_MPI_CHECK(MPI_Comm_spawn(command[0].c_str(), args.data(), count, MPI_INFO_NULL, 0, world,
                                       &inter, errcodes.data()));
    }
    last.phases["spawn"] = Seconds(t);
    t = Clock::now();
    MPI_Comm merged = MPI_COMM_NULL;
    ELASTIC_MPI_CHECK(MPI_Intercomm_merge(inter, 0, &merged));  // parents first: keep ranks 0..P-1
    last.phases["merge"] = Seconds(t);
    return HandOver(inter, merged, new_group, count);
  }

  // Parents' side after a merge: send meta and state to the newcomers, adopt the merged world.
  Status HandOver(MPI_Comm inter, MPI_Comm merged, std::uint32_t new_group, int count) {
    auto t = Clock::now();
    if (new_group >= next_group_id) next_group_id = new_group + 1;
    if (Status s = SendState(inter, new_group); !s.ok()) return s;
    last.phases["state"] = Seconds(t);
    groups.push_back({new_group, count, inter});
    if (Status s = AdoptWorld(merged); !s.ok()) return s;
    t = Clock::now();
    if (Status s = AfterWorldChange(count); !s.ok()) return s;
    last.phases["rebuild"] = Seconds(t);
    return Status::Ok();
  }

  // Accepts one joining group on a freshly published port; checks its token.
  // Returns ok with joined=false when the joiner was refused (the world keeps its size).
  Status Accept(std::uint32_t group, bool* joined) {
    *joined = false;
    auto t = Clock::now();
    MPI_Comm inter = MPI_COMM_NULL;
    bool accepted = false;
    const std::string token = expected_token;
    expected_token.assign(expected_token.size(), '\0');  // a token is used once
    expected_token.clear();
    Status st = AcceptChecked(JoinServiceName(options.job_id, group), group, token, &inter, &accepted);
    last.phases["accept"] = Seconds(t);
    if (!st.ok() || !accepted) return st;
    t = Clock::now();
    MPI_Comm merged = MPI_COMM_NULL;
    ELASTIC_MPI_CHECK(MPI_Intercomm_merge(inter, 0, &merged));
    last.phases["merge"] = Seconds(t);
    int remote = 0;
    ELASTIC_MPI_CHECK(MPI_Comm_remote_size(inter, &remote));
    *joined = true;
    return HandOver(inter, merged, group, remote);
  }

  // The last group leaves: survivors split, everyone frees the merged world, both sides
  // disconnect the group's inter-communicator (disconnecting the merged one hangs in 4.1.4).
  Status Shrink(std::uint32_t group) {
    if (groups.size() < 2 || groups.back().id != group) {
      return Status(ErrorKind::kInternal, "shrink of group " + std::to_string(group) + " that is not the last");
    }
    auto t = Clock::now();
    const bool leaving = group_id == group;
    std::vector<int> leavers(static_cast<std::size_t>(groups.back().size));  // the world's last ranks
    for (std::size_t i = 0; i < leavers.size(); ++i) leavers[i] = size - groups.back().size + static_cast<int>(i);
    MPI_Comm survivors = MPI_COMM_NULL;
    ELASTIC_MPI_CHECK(MPI_Comm_split(world, leaving ? MPI_UNDEFINED : 0, rank, &survivors));
    ELASTIC_MPI_CHECK(MPI_Comm_free(&world));
    last.phases["split"] = Seconds(t);
    t = Clock::now();
    MPI_Comm inter = groups.back().inter;
    groups.pop_back();
    if (inter != MPI_COMM_NULL) {
      detail::Watchdog watchdog("disconnect of group " + std::to_string(group), options.connect_timeout_s);
      ELASTIC_MPI_CHECK(MPI_Comm_disconnect(&inter));
    }
    last.phases["disconnect"] = Seconds(t);
    if (leaving) {
      left = true;
      world = MPI_COMM_NULL;
      return backend ? backend->Shrink(MPI_COMM_NULL, leavers) : Status::Ok();
    }
    world = survivors;
    if (Status s = UpdateRankSize(); !s.ok()) return s;
    shrunk_before = true;
    last_shrink = Clock::now();
    t = Clock::now();
    if (options.bind) Bind();
    if (Status s = backend->Shrink(world, leavers); !s.ok()) return s;
    last.phases["rebuild"] = Seconds(t);
    return Status::Ok();
  }

  // --- connect/accept with the join record (section 6 of interfaces.md) -------------------
  // Collective over world: opens a port, publishes it as `service`, accepts one connection and
  // checks the joiner's record against (group, token) on rank 0. On a refusal the
  // inter-communicator is already disconnected and *accepted is false.
  Status AcceptChecked(const std::string& service, std::uint32_t group, const std::string& token, MPI_Comm* inter,
                       bool* accepted) {
    *accepted = false;
    std::array<char, MPI_MAX_PORT_NAME> port{};
    if (rank == 0) {
      ELASTIC_MPI_CHECK(MPI_Open_port(MPI_INFO_NULL, port.data()));
      ELASTIC_MPI_CHECK(MPI_Publish_name(service.c_str(), MPI_INFO_NULL, port.data()));
      Log(LogLevel::kInfo, kComponent, "accepting group ", group, " on service ", service);
    }
    {
      detail::Watchdog watchdog("MPI_Comm_accept on " + service, options.connect_timeout_s);
      ELASTIC_MPI_CHECK(MPI_Comm_accept(port.data(), MPI_INFO_NULL, 0, world, inter));
    }
    if (rank == 0) {
      MPI_Unpublish_name(service.c_str(), MPI_INFO_NULL, port.data());
      MPI_Close_port(port.data());
    }
    int verdict = 0;
    if (rank == 0) {
      JoinRecord received{};
      MPI_Request request = MPI_REQUEST_NULL;
      ELASTIC_MPI_CHECK(MPI_Irecv(received.data(), 64, MPI_BYTE, 0, kTagJoinRecord, *inter, &request));
      int done = 0;
      const auto deadline = Clock::now() + std::chrono::duration<double>(options.connect_timeout_s);
      while (!done && Clock::now() < deadline) {
        ELASTIC_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (!done) {
        MPI_Cancel(&request);
        MPI_Request_free(&request);
        Log(LogLevel::kError, kComponent, "group ", group, " sent no join record within ",
            options.connect_timeout_s, " s");
      } else {
        auto expected = EncodeJoinRecord(group, token);
        verdict = expected.ok() && RecordsEqual(expected.value(), received) ? 1 : 0;
      }
      ELASTIC_MPI_CHECK(MPI_Send(&verdict, 1, MPI_INT, 0, kTagJoinVerdict, *inter));
    }
    ELASTIC_MPI_CHECK(MPI_Bcast(&verdict, 1, MPI_INT, 0, world));
    if (verdict == 0) {
      Log(LogLevel::kError, kComponent, "group ", group, " refused: bad-token; disconnecting");
      detail::Watchdog watchdog("disconnect of refused group " + std::to_string(group), options.connect_timeout_s);
      ELASTIC_MPI_CHECK(MPI_Comm_disconnect(inter));
      return Status::Ok();
    }
    *accepted = true;
    return Status::Ok();
  }

  // Collective over world (the joining side): looks `service` up (polling until the connect
  // timeout), connects, sends the join record of (group, token) and waits for the verdict.
  // kTimeout: nobody published the service; kPermission: refused (bad token).
  Status ConnectChecked(const std::string& service, std::uint32_t group, const std::string& token, MPI_Comm* inter) {
    std::array<char, MPI_MAX_PORT_NAME> port{};
    int found = 0;
    if (rank == 0) {
      // The running world publishes the port only when it expects us: poll for it. The poll
      // period adds to the parent's pause (it waits in accept), so it is short.
      Log(LogLevel::kVerbose, kComponent, "group ", group, " is up: waiting for ", service);
      const auto deadline = Clock::now() + std::chrono::duration<double>(options.connect_timeout_s);
      while (Clock::now() < deadline) {
        if (MPI_Lookup_name(service.c_str(), MPI_INFO_NULL, port.data()) == MPI_SUCCESS) {
          found = 1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      Log(LogLevel::kInfo, kComponent, found ? "found " : "did not find ", service);
    }
    ELASTIC_MPI_CHECK(MPI_Bcast(&found, 1, MPI_INT, 0, world));
    if (!found) {
      return Status(ErrorKind::kTimeout, "no running world published " + service + " within " +
                                             std::to_string(options.connect_timeout_s) + " s");
    }
    ELASTIC_MPI_CHECK(MPI_Bcast(port.data(), MPI_MAX_PORT_NAME, MPI_CHAR, 0, world));
    {
      detail::Watchdog watchdog("MPI_Comm_connect to " + service, options.connect_timeout_s);
      ELASTIC_MPI_CHECK(MPI_Comm_connect(port.data(), MPI_INFO_NULL, 0, world, inter));
    }
    int verdict = 0;
    if (rank == 0) {
      JoinRecord record{};
      if (auto r = EncodeJoinRecord(group, token); r.ok()) record = r.value();
      ELASTIC_MPI_CHECK(MPI_Send(record.data(), 64, MPI_BYTE, 0, kTagJoinRecord, *inter));
      detail::Watchdog watchdog("join verdict from " + service, options.connect_timeout_s);
      ELASTIC_MPI_CHECK(MPI_Recv(&verdict, 1, MPI_INT, 0, kTagJoinVerdict, *inter, MPI_STATUS_IGNORE));
    }
    ELASTIC_MPI_CHECK(MPI_Bcast(&verdict, 1, MPI_INT, 0, world));
    if (verdict == 0) {
      MPI_Comm_disconnect(inter);
      return Status(ErrorKind::kPermission, "join of group " + std::to_string(group) + " through " + service +
                                                " refused by the running world (bad-token)");
    }
    return Status::Ok();
  }

  // --- the base job's initial world from its node groups -----------------------------------
  // Node group i > 0 connects to the world of node groups 0..i-1 (service elastic.<job>.0.<i>,
  // published by that world's rank 0, which is node group 0's rank 0) and merges behind it; then
  // every merged world accepts the next node group, in order. All authenticate with the job's
  // initial token and group id 0. The result is one world whose ranks are node group 0's, then
  // node group 1's, ..., recorded as the one base group (id 0) that never leaves.
  Status MergeNodeGroups() {
    const int me = options.node_group;
    const int n = options.node_groups;
    auto t = Clock::now();
    int mine = size;
    if (me > 0) {
      MPI_Comm inter = MPI_COMM_NULL;
      const std::string service = NodeGroupService(me);
      if (Status st = ConnectChecked(service, 0, options.join_token, &inter); !st.ok()) return st;
      MPI_Comm merged = MPI_COMM_NULL;
      ELASTIC_MPI_CHECK(MPI_Intercomm_merge(inter, 1, &merged));
      base_links.push_back(inter);
      if (Status st = AdoptWorld(merged); !st.ok()) return st;
    }
    for (int i = me + 1; i < n; ++i) {
      MPI_Comm inter = MPI_COMM_NULL;
      bool accepted = false;
      if (Status st = AcceptChecked(NodeGroupService(i), 0, options.join_token, &inter, &accepted); !st.ok()) {
        return st;
      }
      if (!accepted) {
        // A node group of the job's own nodes with another token: misconfiguration, not an attack
        // we can tell apart. The world goes on without it; its launcher reports the refusal.
        Log(LogLevel::kError, kComponent, "node group ", i, " refused (bad token): the job runs without it");
        continue;
      }
      MPI_Comm merged = MPI_COMM_NULL;
      ELASTIC_MPI_CHECK(MPI_Intercomm_merge(inter, 0, &merged));
      base_links.push_back(inter);
      if (Status st = AdoptWorld(merged); !st.ok()) return st;
    }
    // The sizes of the node groups, in world rank order (node_group_sizes is informative).
    std::vector<int> all(static_cast<std::size_t>(size), 0);
    ELASTIC_MPI_CHECK(MPI_Allgather(&me, 1, MPI_INT, all.data(), 1, MPI_INT, world));
    node_group_sizes.clear();
    for (std::size_t r = 0; r < all.size(); ++r) {
      if (r == 0 || all[r] != all[r - 1]) node_group_sizes.push_back(0);
      ++node_group_sizes.back();
    }
    (void)mine;
    if (rank == 0) {
      Log(LogLevel::kInfo, kComponent, "initial world of ", size, " ranks from ", node_group_sizes.size(),
          " node groups in ", Seconds(t), " s");
    }
    return Status::Ok();
  }
  std::string NodeGroupService(int node_group) const {
    return JoinServiceName(options.job_id, 0) + "." + std::to_string(node_group);
  }

  // --- checkpoints at rescale points ---------------------------------------------------------
  std::string CheckpointDir() const {
    if (!options.checkpoint_dir.empty()) return options.checkpoint_dir;
    if (!options.run_dir.empty()) return options.run_dir + "/checkpoint";
    return "";
  }

  // --- a joining group: connect through the rendezvous and merge --------------------------
  Status Join() {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (rank == 0 && link) {
      // Tell elasticd this group is up: it then sends the parent the grow command.
      auto r = link->Call({{"type", "ready"}, {"group", options.group_id}});
      if (!r.ok()) Log(LogLevel::kWarning, kComponent, "could not tell elasticd this group is ready: ", r.status().message());
    }
    MPI_Comm inter = MPI_COMM_NULL;
    if (Status st = ConnectChecked(JoinServiceName(options.job_id, options.group_id), options.group_id,
                                   options.join_token, &inter);
        !st.ok()) {
      return st;
    }
    MPI_Comm merged = MPI_COMM_NULL;
    ELASTIC_MPI_CHECK(MPI_Intercomm_merge(inter, 1, &merged));
    return AfterMerge(inter, merged);
  }

  // A newcomer after its merge: receive the meta now; the buffers come in Begin().
  Status AfterMerge(MPI_Comm inter, MPI_Comm merged) {
    std::string meta;
    if (Status s = BcastString(&meta, 0, inter, true); !s.ok()) return s;
    if (Status s = AdoptWorld(merged); !s.ok()) return s;
    if (Status s = ApplyMeta(meta, inter); !s.ok()) return s;
    newcomer = true;
    pending_inter = inter;
    return Status::Ok();
  }
};

// ---------------------------------------------------------------------------------------------

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Session>> Session::Create(SessionOptions options, int* argc, char*** argv) {
  if (options.global_batch == 0) {
    return Status(ErrorKind::kInvalidArgument, "SessionOptions.global_batch must be > 0");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  Impl& s = *impl;
  int initialized = 0;
  ELASTIC_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = 0;
    ELASTIC_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    s.own_mpi = true;
  }
  // At the end of a job whose world spans several launches (extension jobs), the groups finalize
  // independently and a TCP peer may already be gone when the last bytes go out: that must be an
  // EPIPE for Open MPI to ignore, not a SIGPIPE that kills a rank that finished its work.
  std::signal(SIGPIPE, SIG_IGN);
  if (s.options.handle_sigterm) {
    struct sigaction sa {};
    sa.sa_handler = OnTerminate;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
  }
  if (s.options.handle_sigusr1) {
    struct sigaction sa {};
    sa.sa_handler = OnCheckpointSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  }
  // Errors come back as return codes: the session turns them into Status values.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  s.global_batch = s.options.global_batch;
  s.base_batch = s.options.base_global_batch != 0 ? s.options.base_global_batch : s.global_batch;
  s.group_id = s.options.group_id;

  MPI_Comm parent = MPI_COMM_NULL;
  ELASTIC_MPI_CHECK(MPI_Comm_get_parent(&parent));
  MPI_Comm own = MPI_COMM_NULL;
  ELASTIC_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &own));
  s.world = own;
  if (Status st = s.UpdateRankSize(); !st.ok()) return st;
  int own_size = s.size;
  // Only the job's rank 0 talks to elasticd: node group 0's rank 0 (or an extension's rank 0).
  if (s.rank == 0 && (s.options.join || s.options.node_group == 0) && !s.options.standalone && !s.options.rigid &&
      !s.options.controller.empty()) {
    auto link = ControllerLink::Create(s.options.controller, s.options.job_id, s.options.munge_socket);
    if (link.ok()) {
      s.link = std::move(link).value();
    } else {
      Log(LogLevel::kWarning, kComponent, "no link to elasticd: ", link.status().message());
    }
  }
  Status joined;
  if (parent != MPI_COMM_NULL) {
    // Spawned by a running world: merge behind the parents.
    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    MPI_Comm merged = MPI_COMM_NULL;
    ELASTIC_MPI_CHECK(MPI_Intercomm_merge(parent, 1, &merged));
    joined = s.AfterMerge(parent, merged);
  } else if (s.options.join) {
    joined = s.Join();
  } else {
    if (s.options.node_groups > 1) joined = s.MergeNodeGroups();
    s.groups.push_back({s.group_id, s.size, MPI_COMM_NULL});  // the base job: every node group
  }
  (void)own_size;
  if (!joined.ok()) return joined;
  s.guard = std::make_unique<detail::CollectiveGuard>(s.options.collective_timeout_s);
  if (s.rank == 0) {
    if (!s.options.metrics_file.empty()) s.sinks.push_back(MakeJsonLinesSink(s.options.metrics_file));
    if (s.link && !s.newcomer) s.sinks.push_back(std::make_shared<ControllerSink>(s.link.get(), s.options.metrics_interval_s, s.options.total_samples));
  }
  Log(LogLevel::kVerbose, kComponent, "session: rank ", s.rank, " of ", s.size, ", group ", s.group_id,
      s.newcomer ? " (newcomer)" : "");
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Session::~Session() {
  Impl& s = *impl_;
  // A world that spans several launches (groups that joined by connect/accept or spawn) is
  // taken apart group by group, latest first, before MPI_Finalize: finalizing a merged world
  // lets each launch tear down its TCP links while the others still send (seen as a hang in
  // MPI_Finalize at the end of a job). Every rank reaches this point together at the end of
  // training; a watchdog keeps a missing rank from turning it into a silent hang.
  if (s.begun && !s.left && !s.stop && s.world != MPI_COMM_NULL && s.groups.size() > 1) {
    detail::Watchdog watchdog("leaving the merged world at the end of the job", s.options.connect_timeout_s);
    while (s.groups.size() > 1 && !s.left) {
      Status st = s.Shrink(s.groups.back().id);
      if (!st.ok()) {
        Log(LogLevel::kWarning, kComponent, "leaving the merged world at the end: ", st.message());
        break;
      }
    }
  }
  s.backend.reset();
  if (s.world != MPI_COMM_NULL) MPI_Comm_free(&s.world);
  // Inter-communicators of groups still present are disconnected only by a shrink; at the end of
  // the job MPI_Finalize cleans them up.
  if (s.own_mpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

void Session::RegisterBytes(const std::string& name, void* data, std::size_t bytes) {
  for (const Buffer& b : impl_->buffers) {
    if (b.name == name) throw Error(ErrorKind::kInvalidArgument, "state '" + name + "' registered twice");
  }
  if (impl_->begun) throw Error(ErrorKind::kInvalidArgument, "state '" + name + "' registered after Begin()");
  impl_->buffers.push_back({name, data, bytes});
}
void Session::RegisterFloats(const std::string& name, float* data, std::size_t count) {
  RegisterBytes(name, data, count * sizeof(float));
}
void Session::RegisterDoubles(const std::string& name, double* data, std::size_t count) {
  RegisterBytes(name, data, count * sizeof(double));
}
void Session::RegisterU64(const std::string& name, std::uint64_t* data, std::size_t count) {
  RegisterBytes(name, data, count * sizeof(std::uint64_t));
}

Status Session::Begin() {
  Impl& s = *impl_;
  if (s.begun) return Status(ErrorKind::kInvalidArgument, "Begin() called twice");
  s.begun = true;
  if (s.newcomer) {
    auto t = Clock::now();
    if (Status st = s.ReceiveState(s.pending_inter); !st.ok()) return st;
    Log(LogLevel::kVerbose, kComponent, "newcomer received state in ", Seconds(t), " s");
  }
  // The parents are inside the rescale point that brought us in: our first RescalePoint() is
  // that same point, already done.
  s.joined_at_point = s.newcomer;
  return s.AfterWorldChange(s.newcomer ? s.groups.back().size : 0);
}

Result<bool> Session::RescalePoint() {
  Impl& s = *impl_;
  if (!s.begun) return Status(ErrorKind::kInvalidArgument, "RescalePoint() before Begin()");
  if (s.left || s.stop) return true;
  if (s.joined_at_point) {
    s.joined_at_point = false;
    return true;
  }
  const auto start = Clock::now();
  std::array<std::int64_t, 6> packet{};
  if (s.rank == 0) {
    const Decision d = s.Decide();
    packet = {static_cast<std::int64_t>(d.action), d.count, d.group, d.global_batch, 0, 0};
    if (s.checkpoint_requested) packet[5] = 1;
    if (s.options.checkpoint_interval_s > 0 && Seconds(s.last_checkpoint) >= s.options.checkpoint_interval_s) {
      packet[5] = 1;
    }
  }
  // Field 5: a checkpoint is wanted (SIGUSR1 on any rank: Slurm's time-limit warning; a command).
  if (g_checkpoint != 0) packet[5] = 1;
  // Field 4: 1 + the position (in join order) of the latest group that has a SIGTERMed rank.
  if (g_terminate != 0) {
    for (std::size_t i = 0; i < s.groups.size(); ++i) {
      if (s.groups[i].id == s.group_id) packet[4] = static_cast<std::int64_t>(i + 1);
    }
  }
  {
    detail::GuardScope guard(s.guard.get(), "the rescale point's allreduce", s.step);
    const int rc = MPI_Allreduce(MPI_IN_PLACE, packet.data(), 6, MPI_INT64_T, MPI_MAX, s.world);
    if (rc != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(rc, text, &len);
      Log(LogLevel::kError, kComponent, "the rescale point's allreduce at step ", s.step, " failed (",
          std::string(text, static_cast<std::size_t>(len)),
          "): a rank of the world died; the job must be restarted from its last checkpoint");
      return Status(ErrorKind::kUnavailable, "rescale point at step " + std::to_string(s.step) + ": " +
                                                 std::string(text, static_cast<std::size_t>(len)) +
                                                 " (a rank of the world died)");
    }
  }
  if (packet[5] != 0 && packet[4] <= 0) {
    // Checkpoint and go on (the base group's SIGTERM below writes its own and stops).
    g_checkpoint = 0;
    const std::string dir = s.CheckpointDir();
    Status written = Status(ErrorKind::kConfig, "no checkpoint directory (ELASTIC_CHECKPOINT_DIR or ELASTIC_RUN_DIR)");
    if (!dir.empty()) {
      if (s.rank == 0) mkdir(dir.c_str(), 0700);
      written = Session::WriteCheckpoint(dir + "/checkpoint.bin");
    }
    if (written.ok()) ++s.checkpoints_written;
    if (s.rank == 0) {
      s.last_checkpoint = Clock::now();  // a failed write is retried one interval later
      if (written.ok()) {
        Log(LogLevel::kInfo, kComponent, "checkpoint at step ", s.step, " written to ", dir, "/checkpoint.bin");
      } else {
        Log(LogLevel::kError, kComponent, "checkpoint at step ", s.step, " not written: ", written.message());
      }
      if (s.checkpoint_command && s.checkpoint_command->id > 0) {
        s.SendAck(*s.checkpoint_command, written.ok(), written.ok() ? "" : written.message());
      }
      s.checkpoint_command.reset();
      s.checkpoint_requested = false;
    }
  }
  if (packet[4] > 0) {
    const std::size_t index = static_cast<std::size_t>(packet[4] - 1);
    if (index == 0) {
      // The base group cannot leave (its ranks are the job): stop everyone, with a checkpoint.
      if (const std::string dir = s.CheckpointDir(); !dir.empty()) {
        if (s.rank == 0) mkdir(dir.c_str(), 0700);
        const std::string path = dir + "/checkpoint.bin";
        if (Session::WriteCheckpoint(path).ok()) {
          ++s.checkpoints_written;
          if (s.rank == 0) Log(LogLevel::kWarning, kComponent, "SIGTERM: checkpoint written to ", path);
        }
      }
      if (s.rank == 0) Log(LogLevel::kWarning, kComponent, "SIGTERM on the base group: stopping");
      if (s.rank == 0) s.AckCurrent(false, "the job is stopping (SIGTERM)");
      s.stop = true;
      return true;
    }
    if (index == s.groups.size() - 1) {
      // The latest group got SIGTERM: it leaves now, whatever rank 0 had decided.
      packet = {static_cast<std::int64_t>(Action::kShrink), 0, s.groups[index].id, 0, 0, 0};
      if (s.rank == 0) {
        Log(LogLevel::kWarning, kComponent, "group ", s.groups[index].id, " got SIGTERM: it leaves");
        if (s.current_command) {  // not carried out now: keep it for the next rescale point
          s.pending.insert(s.pending.begin(), *s.current_command);
          s.current_command.reset();
        }
        s.signalled_leave = s.groups[index].id;
      }
    } else if (s.rank == 0 && !s.warned_term) {
      s.warned_term = true;
      Log(LogLevel::kError, kComponent, "group ", s.groups[index].id,
          " got SIGTERM but later groups must leave first (LIFO); waiting");
    }
  }
  const auto action = static_cast<Action>(packet[0]);
  ++s.step;
  if (action == Action::kNone) return false;

  s.last = RescaleInfo{};
  s.last.old_size = s.size;
  s.last.old_batch = s.global_batch;
  s.last.group = static_cast<std::uint32_t>(packet[2]);
  // The new batch is in force before the hand-over, so newcomers receive it with the meta; a
  // failed change puts the old one back.
  if (packet[3] != 0) s.global_batch = static_cast<std::uint64_t>(packet[3]);
  Status status;
  bool changed = true;
  switch (action) {
    case Action::kSpawn:
      s.last.what = "grow";
      status = s.Spawn(static_cast<int>(packet[1]), static_cast<std::uint32_t>(packet[2]));
      break;
    case Action::kAccept: {
      s.last.what = "join";
      bool joined = false;
      status = s.Accept(static_cast<std::uint32_t>(packet[2]), &joined);
      if (status.ok() && !joined) {
        s.last.ok = false;
        s.last.error = "bad-token";
        changed = false;
      }
      break;
    }
    case Action::kShrink:
      s.last.what = "shrink";
      status = s.Shrink(static_cast<std::uint32_t>(packet[2]));
      break;
    case Action::kBatch:
      s.last.what = "batch";
      break;
    case Action::kNone:
      break;
  }
  if (!status.ok() || !changed) s.global_batch = s.last.old_batch;
  if (!status.ok()) {
    s.last.ok = false;
    s.last.error = status.message();
    if (s.rank == 0) s.AckCurrent(false, status.message());
    return status;
  }
  s.last.new_size = s.left ? 0 : s.size;
  s.last.new_batch = s.global_batch;
  s.last.pause_s = Seconds(start);
  if (s.rank == 0 && !s.left) {
    Log(LogLevel::kInfo, kComponent, s.last.what, s.last.ok ? "" : " FAILED", " at step ", s.step, ": ",
        s.last.old_size, " -> ", s.last.new_size, " ranks, batch ", s.last.old_batch, " -> ",
        s.last.new_batch, ", lr factor ", s.LrFactorAt(s.last.old_batch), " -> ", s.LrFactorAt(s.last.new_batch),
        ", pause ", s.last.pause_s, " s");
    for (const auto& sink : s.sinks) sink->OnRescale(s.last.what, s.size, s.last.pause_s);
    s.AckCurrent(s.last.ok, s.last.error);
    if (s.signalled_leave != 0 && s.link) {  // a group left on SIGTERM: elasticd did not ask for it
      s.link->Call({{"type", "left"}, {"group", s.signalled_leave}, {"reason", "SIGTERM"}});
    }
    s.signalled_leave = 0;
  }
  return changed;
}

bool Session::left() const noexcept { return impl_->left; }
std::string Session::checkpoint_path() const {
  const std::string dir = impl_->CheckpointDir();
  return dir.empty() ? "" : dir + "/checkpoint.bin";
}
int Session::checkpoints_written() const noexcept { return impl_->checkpoints_written; }
bool Session::should_stop() const noexcept { return impl_->left || impl_->stop; }
bool Session::newcomer() const noexcept { return impl_->newcomer; }
MPI_Comm Session::world() const noexcept { return impl_->world; }
int Session::rank() const noexcept { return impl_->rank; }
int Session::size() const noexcept { return impl_->size; }
std::uint32_t Session::group_id() const noexcept { return impl_->group_id; }
std::uint64_t Session::step() const noexcept { return impl_->step; }
std::uint64_t Session::global_batch() const noexcept { return impl_->global_batch; }
std::uint64_t Session::local_batch() const noexcept {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  if (impl_->size <= 0) return 0;
  EpochSharder::SliceOf(impl_->global_batch, impl_->rank, impl_->size, &begin, &end);
  return end - begin;
}
double Session::lr_factor() const {
  return LrFactor(impl_->options.lr_rule, static_cast<double>(impl_->global_batch),
                  static_cast<double>(impl_->base_batch), impl_->noise);
}
const GradientNoise& Session::gradient_noise() const noexcept { return impl_->noise; }
const RescaleInfo& Session::last_rescale() const noexcept { return impl_->last; }
const SessionOptions& Session::options() const noexcept { return impl_->options; }

CollectiveBackend& Session::backend() {
  if (!impl_->backend) throw Error(ErrorKind::kInternal, "Session::backend() before Begin()");
  return *impl_->backend;
}

namespace {
template <typename T>
Status Observe(Session::Impl& s, std::span<const T> local, std::uint64_t count, std::span<const T> global,
               GradientNoise& noise) {
  if (local.size() != global.size()) {
    return Status(ErrorKind::kInvalidArgument, "ObserveGradients: local and global sizes differ");
  }
  double local_sqr = 0;
  for (T v : local) local_sqr += static_cast<double>(v) * static_cast<double>(v);
  double global_sqr = 0;
  for (T v : global) global_sqr += static_cast<double>(v) * static_cast<double>(v);
  // {sum_i b_i |g_i|^2, B, ranks with samples}
  std::array<double, 3> sums = {static_cast<double>(count) * local_sqr, static_cast<double>(count),
                                count > 0 ? 1.0 : 0.0};
  {
    detail::GuardScope guard(s.guard.get(), "the gradient-statistics allreduce", s.step);
    ELASTIC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums.data(), 3, MPI_DOUBLE, MPI_SUM, s.world));
  }
  noise.Observe(sums[0], global_sqr, sums[1], static_cast<int>(sums[2]));
  return Status::Ok();
}
}  // namespace

Status Session::ObserveGradients(std::span<const double> local_mean, std::uint64_t local_count,
                                 std::span<const double> global_mean) {
  return Observe(*impl_, local_mean, local_count, global_mean, impl_->noise);
}
Status Session::ObserveGradients(std::span<const float> local_mean, std::uint64_t local_count,
                                 std::span<const float> global_mean) {
  return Observe(*impl_, local_mean, local_count, global_mean, impl_->noise);
}

void Session::ReportStep(double step_time_s, std::uint64_t samples_in_step) {
  Impl& s = *impl_;
  s.samples += samples_in_step;
  if (s.rank != 0 || s.sinks.empty()) return;
  StepMetrics m;
  m.step = s.step;
  m.gpus = s.size;
  m.global_batch = s.global_batch;
  m.local_batch = local_batch();
  m.step_time_s = step_time_s;
  m.grad_sqr = s.noise.grad_sqr();
  m.grad_var = s.noise.grad_var();
  m.samples = s.samples;
  m.lr_factor = lr_factor();
  for (const auto& sink : s.sinks) sink->OnStep(m);
}

void Session::AddMetricsSink(std::shared_ptr<MetricsSink> sink) {
  if (impl_->rank == 0 && sink) impl_->sinks.push_back(std::move(sink));
}

// Checkpoint file: "ELCKPT01", then per buffer: u64 name length, name, u64 bytes, bytes.
Status Session::WriteCheckpoint(const std::string& path) {
  Impl& s = *impl_;
  int ok = 1;
  std::string error;
  if (s.rank == 0) {
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write("ELCKPT01", 8);
      for (const Buffer& b : s.buffers) {
        const std::uint64_t n = b.name.size();
        const std::uint64_t bytes = b.bytes;
        out.write(reinterpret_cast<const char*>(&n), sizeof n);
        out.write(b.name.data(), static_cast<std::streamsize>(n));
        out.write(reinterpret_cast<const char*>(&bytes), sizeof bytes);
        out.write(static_cast<const char*>(b.data), static_cast<std::streamsize>(bytes));
      }
      out.flush();
      if (!out) {
        ok = 0;
        error = "cannot write checkpoint " + tmp;
      }
    }
    if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
      ok = 0;
      error = "cannot rename checkpoint to " + path + ": " + std::strerror(errno);
    }
  }
  ELASTIC_MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, s.world));
  if (!ok) return Status(ErrorKind::kUnavailable, s.rank == 0 ? error : "rank 0 failed to write the checkpoint");
  return Status::Ok();
}

Status Session::ReadCheckpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 8> magic{};
  in.read(magic.data(), 8);
  if (!in || std::memcmp(magic.data(), "ELCKPT01", 8) != 0) {
    return Status(ErrorKind::kNotFound, "no checkpoint at " + path);
  }
  for (Buffer& b : impl_->buffers) {
    std::uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), sizeof n);
    if (!in || n > 4096) return Status(ErrorKind::kProtocol, "corrupt checkpoint " + path);
    std::string name(n, '\0');
    in.read(name.data(), static_cast<std::streamsize>(n));
    std::uint64_t bytes = 0;
    in.read(reinterpret_cast<char*>(&bytes), sizeof bytes);
    if (!in || name != b.name || bytes != b.bytes) {
      return Status(ErrorKind::kInvalidArgument, "checkpoint " + path + " holds '" + name + "' (" +
                                                     std::to_string(bytes) + " bytes) where '" + b.name +
                                                     "' (" + std::to_string(b.bytes) + " bytes) is registered");
    }
    in.read(static_cast<char*>(b.data), static_cast<std::streamsize>(bytes));
    if (!in) return Status(ErrorKind::kProtocol, "truncated checkpoint " + path);
  }
  return Status::Ok();
}

}  // namespace elastic::mpi
