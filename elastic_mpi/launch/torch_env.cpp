#include "torch_env.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "elastic/common/env_vars.h"
#include "elastic/common/exit_codes.h"
#include "group_dir.h"
#include "private_file.h"

namespace elastic::launch {
namespace {

std::string Var(const char* name, const std::string& value) { return std::string(name) + "=" + value; }

std::optional<int> ParseInt(std::string_view text) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

Result<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status(ErrorKind::kUnavailable, std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  close(fd);
  if (!ok) return Status(ErrorKind::kUnavailable, std::string("no free TCP port: ") + std::strerror(err));
  return static_cast<int>(ntohs(addr.sin_port));
}

Result<std::string> InterfaceAddress(const std::string& interface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Status(ErrorKind::kUnavailable, std::string("getifaddrs: ") + std::strerror(errno));
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || interface != i->ifa_name) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  freeifaddrs(list);
  if (found.empty()) {
    return Status(ErrorKind::kConfig, "ELASTIC_RENDEZVOUS_IF=" + interface +
                                          " has no IPv4 address on this node: name an interface it has, or set "
                                          "MASTER_ADDR in the job script");
  }
  return found;
}

}  // namespace

std::string NodeRecordPath(const std::string& run_dir, int node_group) {
  return run_dir + "/torch-node" + std::to_string(node_group) + ".json";
}

std::string FormatNodeRecord(const NodeRecord& record) {
  nlohmann::json j{{"uri", record.uri}, {"ranks", record.ranks}};
  if (!record.node.empty()) j["node"] = record.node;
  if (!record.master_addr.empty()) {
    j["master_addr"] = record.master_addr;
    j["master_port"] = record.master_port;
  }
  return j.dump() + "\n";
}

Result<NodeRecord> ParseNodeRecord(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("uri") || !j["uri"].is_string() || !j.contains("ranks") ||
      !j["ranks"].is_number_integer()) {
    return Status(ErrorKind::kProtocol, "not a node record: " + std::string(text.substr(0, 200)));
  }
  NodeRecord r;
  r.uri = j["uri"].get<std::string>();
  r.ranks = j["ranks"].get<int>();
  if (j.contains("node") && j["node"].is_string()) r.node = j["node"].get<std::string>();
  if (j.contains("master_addr") && j["master_addr"].is_string()) r.master_addr = j["master_addr"].get<std::string>();
  if (j.contains("master_port") && j["master_port"].is_number_integer()) r.master_port = j["master_port"].get<int>();
  return r;
}

Result<TorchWorld> WorldFromRecords(const std::vector<NodeRecord>& records, int node_group) {
  const int n = static_cast<int>(records.size());
  if (node_group < 0 || node_group >= n) {
    return Status(ErrorKind::kInvalidArgument,
                  "node group " + std::to_string(node_group) + " is not below the " + std::to_string(n) + " node groups");
  }
  if (records[0].master_addr.empty() || records[0].master_port < 1 || records[0].master_port > 65535) {
    return Status(ErrorKind::kInvalidArgument, "node group 0's record names no MASTER_ADDR and MASTER_PORT");
  }
  TorchWorld w;
  w.group_rank = node_group;
  w.group_world_size = n;
  w.world_size = 0;
  for (int g = 0; g < n; ++g) {
    if (records[g].ranks < 1) {
      return Status(ErrorKind::kInvalidArgument, "node group " + std::to_string(g) + " starts no ranks");
    }
    if (g < node_group) w.rank_offset += records[g].ranks;
    w.world_size += records[g].ranks;
  }
  w.local_world_size = records[node_group].ranks;
  w.master_addr = records[0].master_addr;
  w.master_port = records[0].master_port;
  return w;
}

Status ChooseMaster(const std::string& interface, bool one_node, NodeRecord* record) {
  // The job script's own choice wins, as torchrun's --master-addr/--master-port would.
  const char* addr = std::getenv(kMasterAddr);
  const char* port = std::getenv(kMasterPort);
  if (addr != nullptr && *addr != '\0') {
    record->master_addr = addr;
  } else if (!interface.empty()) {
    auto a = InterfaceAddress(interface);
    if (!a.ok()) return a.status();
    record->master_addr = a.value();
  } else if (one_node) {
    record->master_addr = "127.0.0.1";
  } else {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
      return Status(ErrorKind::kUnavailable, std::string("gethostname: ") + std::strerror(errno) +
                                                 ": set MASTER_ADDR in the job script");
    }
    // torch's TCPStore clients connect to this name: it must resolve, or they would wait in vain.
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(host, nullptr, &hints, &found); rc != 0) {
      return Status(ErrorKind::kConfig, std::string("this node's name '") + host + "' does not resolve (" +
                                            gai_strerror(rc) + "): set ELASTIC_RENDEZVOUS_IF to the interface "
                                            "the nodes share, or MASTER_ADDR, in the job script");
    }
    freeaddrinfo(found);
    record->master_addr = host;
  }
  if (port != nullptr && *port != '\0') {
    const auto p = ParseInt(port);
    if (!p || *p < 1 || *p > 65535) {
      return Status(ErrorKind::kInvalidArgument,
                    std::string("MASTER_PORT='") + port + "' is not a TCP port (1-65535): fix or unset it");
    }
    record->master_port = *p;
  } else {
    auto p = FreePort();
    if (!p.ok()) return p.status();
    record->master_port = p.value();
  }
  return Status::Ok();
}

Result<TorchWorld> ExchangeRecords(const std::string& run_dir, const NodeRecord& mine, int node_group, int node_groups,
                                   double wait_s, std::vector<NodeRecord>* all) {
  const std::string path = NodeRecordPath(run_dir, node_group);
  if (!WritePrivateFile(path, FormatNodeRecord(mine))) {
    return Status(ErrorKind::kUnavailable, "cannot write " + path + ": " + std::strerror(errno));
  }
  std::vector<NodeRecord> records(static_cast<std::size_t>(node_groups));
  std::vector<bool> have(records.size(), false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  for (;;) {
    bool complete = true;
    for (int g = 0; g < node_groups; ++g) {
      if (have[g]) continue;
      auto r = ParseNodeRecord(ReadFirstLine(NodeRecordPath(run_dir, g)));
      if (r.ok() && r.value().uri == mine.uri) {
        records[g] = r.value();
        have[g] = true;
      } else {
        complete = false;
      }
    }
    if (complete) {
      if (all != nullptr) *all = records;
      return WorldFromRecords(records, node_group);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string missing;
  for (int g = 0; g < node_groups; ++g) {
    if (!have[g]) missing += (missing.empty() ? "" : ", ") + std::to_string(g);
  }
  std::ostringstream msg;
  msg << "node group(s) " << missing << " published no rank count in " << run_dir << " within " << wait_s
      << " s: every node of the step must run elastic-launch with the same run dir (--wait S waits longer)";
  return Status(ErrorKind::kTimeout, msg.str());
}

std::vector<std::string> TorchEnvironment(const TorchWorld* world, int local_world_size, const std::string& run_id,
                                          int local_rank) {
  std::vector<std::string> env = {
      Var(kLocalWorldSize, std::to_string(local_world_size)),
      Var(kRoleName, "default"),
      Var(kRestartCount, "0"),
      Var(kMaxRestarts, "0"),
      Var(kRunId, run_id),
      // torchrun's agent serves the store itself and tells the ranks so; here rank 0 serves it.
      "TORCHELASTIC_USE_AGENT_STORE",
  };
  // PyTorch 2.4 and later serve env://'s TCPStore with libuv unless USE_LIBUV=0, and fail where
  // PyTorch was built without it (Debian 13's 2.6: "use_libuv was requested but PyTorch was
  // build without libuv support"); the store without libuv is in every release. The job's own
  // USE_LIBUV wins.
  if (std::getenv("USE_LIBUV") == nullptr) env.push_back("USE_LIBUV=0");
  if (local_rank >= 0) env.push_back(Var(kLocalRank, std::to_string(local_rank)));
  if (world == nullptr) {
    for (const char* name : {kRank, kRoleRank, kWorldSize, kRoleWorldSize, kGroupRank, kGroupWorldSize, kMasterAddr,
                             kMasterPort}) {
      env.emplace_back(name);
    }
    return env;
  }
  if (local_rank >= 0) {
    env.push_back(Var(kRank, std::to_string(world->rank_offset + local_rank)));
    env.push_back(Var(kRoleRank, std::to_string(world->rank_offset + local_rank)));
  }
  env.push_back(Var(kWorldSize, std::to_string(world->world_size)));
  env.push_back(Var(kRoleWorldSize, std::to_string(world->world_size)));
  env.push_back(Var(kGroupRank, std::to_string(world->group_rank)));
  env.push_back(Var(kGroupWorldSize, std::to_string(world->group_world_size)));
  env.push_back(Var(kMasterAddr, world->master_addr));
  env.push_back(Var(kMasterPort, std::to_string(world->master_port)));
  return env;
}

int RankShimMain(int argc, char** argv) {
  // OFFSET, then an optional GROUP_DIR (group_dir.h: ranks the launcher did not start itself).
  const bool with_group_dir = argc >= 6 && std::string_view(argv[3]) != "--" && std::string_view(argv[4]) == "--";
  const int program = with_group_dir ? 5 : 4;
  if (argc < program + 1 || std::string_view(argv[1]) != kRankShimOption ||
      std::string_view(argv[program - 1]) != "--") {
    std::fprintf(stderr, "elastic-launch: usage: elastic-launch %s OFFSET|- [GROUP_DIR] -- PROGRAM [ARGS...] (the "
                 "launcher runs this itself under its mpirun)\n", kRankShimOption);
    return kExitUsage;
  }
  // The launcher's environment first (the DVM's own for the rank kept), then the per-rank values.
  if (with_group_dir && !AdoptGroupDir(argv[3])) {
    std::fprintf(stderr, "elastic-launch: %s: cannot read the group's environment in %s: %s\n", kRankShimOption,
                 argv[3], std::strerror(errno));
    return kExitLaunch;
  }
  const std::string_view offset_text = argv[2];
  // OFFSET: "-", one rank number, or the first rank of each node ("0,4,6").
  std::vector<int> starts;
  bool offset_ok = offset_text == "-";
  if (!offset_ok) {
    offset_ok = true;
    for (std::size_t pos = 0; pos <= offset_text.size();) {
      const std::size_t comma = std::min(offset_text.find(',', pos), offset_text.size());
      const std::optional<int> v = ParseInt(offset_text.substr(pos, comma - pos));
      offset_ok = offset_ok && v && *v >= 0 && (starts.empty() ? true : *v > starts.back());
      if (v) starts.push_back(*v);
      pos = comma + 1;
    }
    offset_ok = offset_ok && (starts.size() == 1 || starts.front() == 0);
  }
  if (!offset_ok) {
    std::fprintf(stderr, "elastic-launch: %s %s: the offset must be a rank number, the first ranks of each node "
                 "(0,R0,...) or -\n", kRankShimOption, argv[2]);
    return kExitUsage;
  }
  auto env_int = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? ParseInt(v) : std::nullopt;
  };
  const std::optional<int> local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
  if (!local_rank || *local_rank < 0) {
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    std::fprintf(stderr, "elastic-launch: %s needs OMPI_COMM_WORLD_LOCAL_RANK (it runs under the launcher's "
                 "mpirun only); got %s\n", kRankShimOption, local != nullptr ? local : "nothing");
    return kExitUsage;
  }
  const std::string lr = std::to_string(*local_rank);
  setenv(kLocalRank, lr.c_str(), 1);
  setenv(contract::kLocalRank, lr.c_str(), 1);
  if (starts.size() == 1) {
    const std::string rank = std::to_string(starts.front() + *local_rank);
    setenv(kRank, rank.c_str(), 1);
    setenv(kRoleRank, rank.c_str(), 1);
  } else if (starts.size() > 1) {
    // One mpirun over every node: this rank's node is the last whose first rank is not above it.
    const std::optional<int> rank = env_int("OMPI_COMM_WORLD_RANK");
    const std::optional<int> size = env_int("OMPI_COMM_WORLD_SIZE");
    std::size_t node = 0;
    while (rank && node + 1 < starts.size() && starts[node + 1] <= *rank) ++node;
    const int node_end = node + 1 < starts.size() ? starts[node + 1] : size.value_or(0);
    if (!rank || !size || *rank >= *size || *rank - starts[node] != *local_rank || node_end <= *rank) {
      std::fprintf(stderr, "elastic-launch: %s %s: rank %s (local rank %d of %s) is not where the nodes' first ranks "
                   "put it: the ranks were not mapped node by node\n", kRankShimOption, argv[2],
                   rank ? std::to_string(*rank).c_str() : "?", *local_rank, size ? std::to_string(*size).c_str() : "?");
      return kExitLaunch;
    }
    const std::string r = std::to_string(*rank);
    setenv(kRank, r.c_str(), 1);
    setenv(kRoleRank, r.c_str(), 1);
    setenv(kGroupRank, std::to_string(node).c_str(), 1);
    setenv(kLocalWorldSize, std::to_string(node_end - starts[node]).c_str(), 1);
    setenv(contract::kLocalSize, std::to_string(node_end - starts[node]).c_str(), 1);
  }
  execvp(argv[program], argv + program);
  std::fprintf(stderr, "elastic-launch: cannot run %s: %s\n", argv[program], std::strerror(errno));
  return 127;
}

std::string NodeStarts(const std::vector<NodeRecord>& records) {
  std::string out;
  int start = 0;
  for (const NodeRecord& r : records) {
    out += (out.empty() ? "" : ",") + std::to_string(start);
    start += r.ranks;
  }
  return out;
}

}  // namespace elastic::launch
