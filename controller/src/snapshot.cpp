#include "snapshot.h"

#include <random>

#include "db_records.h"
#include "registry.h"

namespace elastic::controller {
namespace {

const char* StateName(SlurmJobState s) {
  switch (s) {
    case SlurmJobState::kPending: return "pending";
    case SlurmJobState::kRunning: return "running";
    case SlurmJobState::kSuspended: return "suspended";
    case SlurmJobState::kEnded: return "ended";
  }
  return "ended";
}

}  // namespace

nlohmann::json SnapshotToJson(const std::vector<NodeInfo>& nodes, const std::vector<JobInfo>& jobs,
                              const nlohmann::json& registry) {
  nlohmann::json n = nlohmann::json::array();
  for (const auto& x : nodes) {
    nlohmann::json node{{"name", x.name}, {"gpu_type", x.gpu_type}, {"gpus", x.gpus}, {"gpus_used", x.gpus_used},
                        {"usable", x.usable}, {"draining", x.draining}, {"unresponsive", x.unresponsive}};
    if (!x.by_type.empty()) {  // several GPU types
      node["by_type"] = nlohmann::json::array();
      for (const auto& t : x.by_type) node["by_type"].push_back({{"type", t.type}, {"gpus", t.gpus}, {"gpus_used", t.gpus_used}});
    }
    n.push_back(std::move(node));
  }
  nlohmann::json j = nlohmann::json::array();
  for (const auto& x : jobs) {
    j.push_back({{"id", x.id}, {"user_id", x.user_id}, {"group_id", x.group_id}, {"user", x.user},
                 {"account", x.account}, {"partition", x.partition}, {"qos", x.qos}, {"name", x.name},
                 {"admin_comment", x.admin_comment}, {"nodes", x.nodes}, {"state", StateName(x.state)},
                 {"held", x.held}, {"waits_for_resources", x.waits_for_resources}, {"gpus", x.gpus},
                 {"gpu_type", x.gpu_type}, {"request_type", x.request_type}, {"time_limit_s", x.time_limit_s},
                 {"gpus_per_node", x.gpus_per_node}, {"nodes_min", x.nodes_min}, {"priority", x.priority}, {"end_time", x.end_time},
                 {"start_time", x.start_time}});
  }
  return {{"version", 1}, {"nodes", n}, {"jobs", j}, {"registry", registry}};
}

Result<RecordedSnapshot> SnapshotFromJson(const nlohmann::json& j) {
  RecordedSnapshot out;
  try {
    if (j.value("version", 0) != 1) return Status(ErrorKind::kInvalidArgument, "snapshot version is not 1");
    for (const auto& x : j.at("nodes")) {
      NodeInfo n;
      n.name = x.at("name");
      n.gpu_type = x.value("gpu_type", "");
      n.gpus = x.value("gpus", 0);
      n.gpus_used = x.value("gpus_used", 0);
      n.usable = x.value("usable", true);
      n.draining = x.value("draining", false);
      n.unresponsive = x.value("unresponsive", false);
      if (x.contains("by_type")) {
        for (const auto& t : x.at("by_type")) n.by_type.push_back({t.at("type"), t.value("gpus", 0), t.value("gpus_used", 0)});
      }
      out.nodes.push_back(n);
    }
    for (const auto& x : j.at("jobs")) {
      JobInfo o;
      o.id = x.at("id");
      o.user_id = x.value("user_id", 0u);
      o.group_id = x.value("group_id", 0u);
      o.user = x.value("user", "");
      o.account = x.value("account", "");
      o.partition = x.value("partition", "");
      o.qos = x.value("qos", "");
      o.name = x.value("name", "");
      o.admin_comment = x.value("admin_comment", "");
      o.nodes = x.value("nodes", "");
      std::string st = x.value("state", "ended");
      o.state = st == "pending" ? SlurmJobState::kPending
                : st == "running" ? SlurmJobState::kRunning
                : st == "suspended" ? SlurmJobState::kSuspended
                                    : SlurmJobState::kEnded;
      o.held = x.value("held", false);
      o.waits_for_resources = x.value("waits_for_resources", false);
      o.gpus = x.value("gpus", 0);
      o.gpu_type = x.value("gpu_type", "");
      o.request_type = x.value("request_type", "");
      o.gpus_per_node = x.value("gpus_per_node", 0);
      o.nodes_min = x.value("nodes_min", 0);
      o.priority = x.value("priority", uint32_t{0});
      o.time_limit_s = x.value("time_limit_s", int64_t{0});
      o.end_time = x.value("end_time", int64_t{0});
      o.start_time = x.value("start_time", int64_t{0});
      out.jobs.push_back(o);
    }
    out.registry = j.value("registry", nlohmann::json::array());
    for (const auto& r : out.registry) (void)ElasticJob::FromJson(r);  // validates
  } catch (const std::exception& e) {
    return Status(ErrorKind::kInvalidArgument, std::string("malformed snapshot: ") + e.what());
  }
  return out;
}

void SeedRegistry(Database& db, const nlohmann::json& registry) {
  for (const auto& r : registry) {
    records::SeedRunningJob(db, r);
  }
}

void SeedExtension(Database& db, uint32_t parent, int group, uint32_t slurm_job, const std::string& node,
                   const std::string& gpu_type, int gpus, const std::string& state, double created_at,
                   double joined_at) {
  db.Run("INSERT INTO extensions (parent, grp, slurm_job, node, gpu_type, gpus, account, token, state, created_at, "
         "joined_at) VALUES (?, ?, ?, ?, ?, ?, 'a', 'x', ?, ?, ?)",
         {int64_t{parent}, int64_t{group}, int64_t{slurm_job}, node, gpu_type, int64_t{gpus}, state, created_at,
          joined_at});
}

RecordedSnapshot GenerateSnapshot(int nodes, int gpus_per_node, int types, int elastic_jobs, int pending, uint64_t seed) {
  std::mt19937_64 rng(seed);
  RecordedSnapshot s;
  for (int i = 0; i < nodes; ++i) {
    NodeInfo n;
    n.name = "n" + std::to_string(i + 1);
    n.gpu_type = "t" + std::to_string(i % types);
    n.gpus = gpus_per_node;
    s.nodes.push_back(n);
  }
  double now = Now();
  uint32_t id = 1000;
  int node = 0;
  for (int k = 0; k < elastic_jobs; ++k) {
    int base = 1 + static_cast<int>(rng() % 4);
    // Find a node of any type with room for the base size.
    int tries = 0;
    while (s.nodes[static_cast<size_t>(node)].gpus - s.nodes[static_cast<size_t>(node)].gpus_used < base && tries < nodes) {
      node = (node + 1) % nodes;
      ++tries;
    }
    if (tries == nodes) break;
    NodeInfo& n = s.nodes[static_cast<size_t>(node)];
    n.gpus_used += base;
    JobInfo j;
    j.id = id++;
    j.user_id = 1000 + static_cast<uint32_t>(rng() % 50);
    j.user = "user" + std::to_string(j.user_id);
    j.account = "acct" + std::to_string(j.user_id % 10);
    j.partition = "gpu";
    j.name = "train";
    j.nodes = n.name;
    j.state = SlurmJobState::kRunning;
    j.gpus = base;
    j.gpu_type = n.gpu_type;
    s.jobs.push_back(j);
    ElasticJob e;
    e.id = j.id;
    e.uid = j.user_id;
    e.user = j.user;
    e.account = j.account;
    e.partition = j.partition;
    e.gpu_type = j.gpu_type;
    e.base_gpus = base;
    e.spec = {{"gpus_min", base}, {"gpus_max", 4 * base}, {"gpu_step", 1}, {"batch_min", 64}, {"batch_max", 4096}};
    e.launcher = {{"rendezvous_uri", "x"}, {"argv", {"train"}}, {"cwd", "/tmp"}, {"env", nlohmann::json::object()}};
    e.registered_at = now - 3600;
    e.batch = 256;
    e.metrics_received = 10;  // its program trains (elasticd grows only such jobs)
    // Half the jobs have measured step times at two sizes (fitted models), the rest the prior.
    if (k % 2 == 0) {
      double a = 0.05 + static_cast<double>(rng() % 100) / 1000.0;
      double b = 0.001 + static_cast<double>(rng() % 100) / 100000.0;
      for (int g : {base, 2 * base}) {
        for (double lb : {32.0, 64.0}) e.samples.push_back({1, g, lb, a + b * lb + 0.01 * (g - 1)});
      }
      e.efficiency = optimizer::EfficiencyParams{64, 1.0, 50.0};
    }
    s.registry.push_back(e.ToJson());
    node = (node + 1) % nodes;
  }
  for (int k = 0; k < pending; ++k) {
    JobInfo j;
    j.id = id++;
    j.user_id = 2000;
    j.user = "rigid";
    j.account = "acct0";
    j.state = SlurmJobState::kPending;
    j.waits_for_resources = true;
    j.gpus = 1 + static_cast<int>(rng() % gpus_per_node);
    j.gpu_type = "t" + std::to_string(rng() % static_cast<uint64_t>(types));
    j.gpus_per_node = j.gpus;  // --gres=gpu:tN:G, one node: the epoch makes room for its shape
    j.nodes_min = 1;
    s.jobs.push_back(j);
  }
  return s;
}

}  // namespace elastic::controller
