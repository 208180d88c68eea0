#include "elastic/optimizer/snapshot_json.h"

#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "elastic/optimizer/goodput.h"

namespace elastic::optimizer {

using nlohmann::json;

namespace {

// Parse errors carry the JSON path of the offending value.
struct ParseError {
  std::string message;
};

[[noreturn]] void Fail(const std::string& path, const std::string& what) { throw ParseError{path + ": " + what}; }

void CheckKeys(const json& obj, const std::string& path, std::initializer_list<const char*> allowed) {
  if (!obj.is_object()) Fail(path, "expected an object");
  for (const auto& [key, unused] : obj.items()) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) Fail(path, "unknown key '" + key + "'");
  }
}

const json* Find(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// The paths of the two functions that return a reference into their argument are string views:
// a path built in the call (a temporary string) then does not look, to gcc 14's
// -Wdangling-reference, like what the reference could point into.
const json& Need(const json& obj, std::string_view path, const char* key) {
  const json* v = Find(obj, key);
  if (!v) Fail(std::string(path), std::string("missing key '") + key + "'");
  return *v;
}

int64_t GetInt(const json& v, const std::string& path, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) Fail(path, "expected an integer");
  const auto x = v.get<int64_t>();
  if (x < lo || x > hi) Fail(path, std::to_string(x) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

int GetInt32(const json& v, const std::string& path, int lo) {
  return static_cast<int>(GetInt(v, path, lo, std::numeric_limits<int>::max()));
}

double GetNumber(const json& v, const std::string& path) {
  if (!v.is_number()) Fail(path, "expected a number");
  const auto x = v.get<double>();
  if (!std::isfinite(x)) Fail(path, "expected a finite number");
  return x;
}

std::string GetString(const json& v, const std::string& path) {
  if (!v.is_string()) Fail(path, "expected a string");
  return v.get<std::string>();
}

const json& GetArray(const json& v, std::string_view path) {
  if (!v.is_array()) Fail(std::string(path), "expected an array");
  return v;
}

Configuration ParseConfiguration(const json& v, const std::string& path) {
  CheckKeys(v, path, {"gpu_type", "gpus", "batch"});
  Configuration c;
  c.gpu_type = GetString(Need(v, path, "gpu_type"), path + ".gpu_type");
  c.gpus = GetInt32(Need(v, path, "gpus"), path + ".gpus", 1);
  if (const json* b = Find(v, "batch")) c.batch = GetInt(*b, path + ".batch", 0, std::numeric_limits<int64_t>::max());
  return c;
}

std::vector<StepSample> ParseSamples(const json& v, const std::string& path) {
  std::vector<StepSample> out;
  const json& arr = GetArray(v, path);
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    CheckKeys(arr[i], p, {"nodes", "gpus", "local_batch", "step_time"});
    StepSample s;
    s.gpus = GetInt32(Need(arr[i], p, "gpus"), p + ".gpus", 1);
    s.nodes = 1;
    if (const json* n = Find(arr[i], "nodes")) s.nodes = GetInt32(*n, p + ".nodes", 1);
    s.local_batch = GetNumber(Need(arr[i], p, "local_batch"), p + ".local_batch");
    s.step_time = GetNumber(Need(arr[i], p, "step_time"), p + ".step_time");
    if (s.local_batch <= 0 || s.step_time <= 0) Fail(p, "local_batch and step_time must be > 0");
    out.push_back(s);
  }
  return out;
}

PolluxParams ParsePolluxParams(const json& v, const std::string& path) {
  CheckKeys(v, path, {"alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma"});
  PolluxParams p;
  auto get = [&](const char* k, double& out) {
    if (const json* x = Find(v, k)) out = GetNumber(*x, path + "." + k);
  };
  get("alpha_c", p.alpha_c);
  get("beta_c", p.beta_c);
  get("alpha_n", p.alpha_n);
  get("beta_n", p.beta_n);
  get("alpha_r", p.alpha_r);
  get("beta_r", p.beta_r);
  get("gamma", p.gamma);
  if (p.gamma < 1.0 || p.gamma > 10.0) Fail(path + ".gamma", "must be in [1, 10]");
  return p;
}

// "model": {"kind": "pollux"|"profile", "efficiency": {...}, "params": {type: {...}},
//           "samples": {type: [...]}}; see docs/optimizer.md.
std::shared_ptr<const GoodputModel> ParseModel(const json& v, const std::string& path) {
  CheckKeys(v, path, {"kind", "efficiency", "params", "samples", "profiles"});
  const std::string kind = GetString(Need(v, path, "kind"), path + ".kind");
  EfficiencyParams eff;
  if (const json* e = Find(v, "efficiency")) {
    const std::string ep = path + ".efficiency";
    CheckKeys(*e, ep, {"init_batch", "grad_sqr", "grad_var"});
    eff.init_batch = GetNumber(Need(*e, ep, "init_batch"), ep + ".init_batch");
    eff.grad_sqr = GetNumber(Need(*e, ep, "grad_sqr"), ep + ".grad_sqr");
    eff.grad_var = GetNumber(Need(*e, ep, "grad_var"), ep + ".grad_var");
    if (eff.init_batch <= 0 || eff.grad_sqr <= 0 || eff.grad_var < 0) {
      Fail(ep, "needs init_batch > 0, grad_sqr > 0, grad_var >= 0");
    }
  }
  std::shared_ptr<const ThroughputModel> tp;
  if (kind == "pollux") {
    std::map<std::string, PolluxParams> params;
    if (const json* ps = Find(v, "params")) {
      if (!ps->is_object()) Fail(path + ".params", "expected an object keyed by GPU type");
      for (const auto& [type, p] : ps->items()) params[type] = ParsePolluxParams(p, path + ".params." + type);
    }
    if (const json* ss = Find(v, "samples")) {
      if (!ss->is_object()) Fail(path + ".samples", "expected an object keyed by GPU type");
      for (const auto& [type, s] : ss->items()) {
        Result<PolluxParams> fit = FitPollux(ParseSamples(s, path + ".samples." + type));
        if (!fit.ok()) Fail(path + ".samples." + type, fit.status().message());
        params[type] = fit.value();
      }
    }
    if (params.empty()) Fail(path, "a pollux model needs 'params' or 'samples'");
    tp = std::make_shared<PolluxThroughput>(std::move(params));
  } else if (kind == "profile") {
    std::map<std::string, std::vector<StepSample>> profiles;
    const json& ps = Need(v, path, "profiles");
    if (!ps.is_object()) Fail(path + ".profiles", "expected an object keyed by GPU type");
    for (const auto& [type, s] : ps.items()) profiles[type] = ParseSamples(s, path + ".profiles." + type);
    tp = std::make_shared<ProfileThroughput>(std::move(profiles));
  } else {
    Fail(path + ".kind", "unknown model kind '" + kind + "' (expected pollux or profile)");
  }
  return std::make_shared<GoodputModel>(tp, eff);
}

Job ParseJob(const json& v, const std::string& path) {
  CheckKeys(v, path, {"id", "owner", "account", "weight", "state", "min_gpus", "max_gpus", "gpu_step",
                      "allowed_gpu_types", "min_batch", "max_batch", "min_local_batch", "max_local_batch",
                      "accumulation", "current", "age_s", "rescales", "remaining_s", "options", "model"});
  Job j;
  j.id = GetString(Need(v, path, "id"), path + ".id");
  if (const json* x = Find(v, "owner")) j.owner = GetString(*x, path + ".owner");
  if (const json* x = Find(v, "account")) j.account = GetString(*x, path + ".account");
  if (const json* x = Find(v, "weight")) j.weight = GetNumber(*x, path + ".weight");
  if (const json* x = Find(v, "state")) {
    const std::string s = GetString(*x, path + ".state");
    if (s == "pending") {
      j.state = JobState::kPending;
    } else if (s == "running") {
      j.state = JobState::kRunning;
    } else {
      Fail(path + ".state", "expected \"pending\" or \"running\", got \"" + s + "\"");
    }
  }
  if (const json* x = Find(v, "options")) {
    const json& arr = GetArray(*x, path + ".options");
    for (size_t i = 0; i < arr.size(); ++i) {
      const std::string p = path + ".options[" + std::to_string(i) + "]";
      CheckKeys(arr[i], p, {"gpu_type", "gpus", "batch", "utility"});
      Option o;
      o.gpu_type = GetString(Need(arr[i], p, "gpu_type"), p + ".gpu_type");
      o.gpus = GetInt32(Need(arr[i], p, "gpus"), p + ".gpus", 1);
      if (const json* b = Find(arr[i], "batch")) o.batch = GetInt(*b, p + ".batch", 0, std::numeric_limits<int64_t>::max());
      o.utility = GetNumber(Need(arr[i], p, "utility"), p + ".utility");
      j.options.push_back(o);
    }
  }
  // GPU bounds default to the span of the option table (step 1), else 1.
  j.min_gpus = 1;
  j.max_gpus = 1;
  if (!j.options.empty()) {
    j.min_gpus = std::numeric_limits<int>::max();
    j.max_gpus = 0;
    for (const Option& o : j.options) {
      j.min_gpus = std::min(j.min_gpus, o.gpus);
      j.max_gpus = std::max(j.max_gpus, o.gpus);
    }
  }
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  if (const json* x = Find(v, "min_gpus")) j.min_gpus = GetInt32(*x, path + ".min_gpus", 1);
  if (const json* x = Find(v, "max_gpus")) j.max_gpus = GetInt32(*x, path + ".max_gpus", 1);
  if (const json* x = Find(v, "gpu_step")) j.gpu_step = GetInt32(*x, path + ".gpu_step", 1);
  if (const json* x = Find(v, "allowed_gpu_types")) {
    const json& arr = GetArray(*x, path + ".allowed_gpu_types");
    for (size_t i = 0; i < arr.size(); ++i) {
      j.allowed_types.push_back(GetString(arr[i], path + ".allowed_gpu_types[" + std::to_string(i) + "]"));
    }
  }
  if (const json* x = Find(v, "min_batch")) j.min_batch = GetInt(*x, path + ".min_batch", 1, kMax);
  if (const json* x = Find(v, "max_batch")) j.max_batch = GetInt(*x, path + ".max_batch", 1, kMax);
  if (const json* x = Find(v, "min_local_batch")) j.min_local_batch = GetInt(*x, path + ".min_local_batch", 1, kMax);
  if (const json* x = Find(v, "max_local_batch")) j.max_local_batch = GetInt(*x, path + ".max_local_batch", 1, kMax);
  if (const json* x = Find(v, "accumulation")) {
    if (!x->is_boolean()) Fail(path + ".accumulation", "expected true or false");
    j.accumulation = x->get<bool>();
  }
  if (const json* x = Find(v, "current")) j.current = ParseConfiguration(*x, path + ".current");
  if (const json* x = Find(v, "age_s")) j.age_s = GetNumber(*x, path + ".age_s");
  if (const json* x = Find(v, "rescales")) j.rescales = GetInt32(*x, path + ".rescales", 0);
  if (const json* x = Find(v, "remaining_s")) j.remaining_s = GetNumber(*x, path + ".remaining_s");
  if (const json* x = Find(v, "model")) j.model = ParseModel(*x, path + ".model");
  return j;
}

}  // namespace

Result<Snapshot> SnapshotFromJson(const json& v) {
  try {
    CheckKeys(v, "snapshot", {"cluster", "jobs"});
    Snapshot s;
    const json& c = Need(v, "snapshot", "cluster");
    CheckKeys(c, "cluster", {"gpu_types"});
    const json& types = GetArray(Need(c, "cluster", "gpu_types"), "cluster.gpu_types");
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string p = "cluster.gpu_types[" + std::to_string(i) + "]";
      CheckKeys(types[i], p, {"name", "nodes", "gpus_per_node"});
      GpuType t;
      t.name = GetString(Need(types[i], p, "name"), p + ".name");
      t.nodes = GetInt32(Need(types[i], p, "nodes"), p + ".nodes", 0);
      t.gpus_per_node = GetInt32(Need(types[i], p, "gpus_per_node"), p + ".gpus_per_node", 1);
      s.cluster.types.push_back(t);
    }
    const json& jobs = GetArray(Need(v, "snapshot", "jobs"), "jobs");
    for (size_t i = 0; i < jobs.size(); ++i) s.jobs.push_back(ParseJob(jobs[i], "jobs[" + std::to_string(i) + "]"));
    if (Status st = Validate(s); !st.ok()) return st;
    return s;
  } catch (const ParseError& e) {
    return Status(ErrorKind::kInvalidArgument, e.message);
  }
}

Result<Snapshot> LoadSnapshot(const std::string& path) {
  json v;
  try {
    if (path == "-") {
      v = json::parse(std::cin);
    } else {
      std::ifstream in(path);
      if (!in) return Status(ErrorKind::kNotFound, "cannot open '" + path + "'");
      v = json::parse(in);
    }
  } catch (const json::parse_error& e) {
    return Status(ErrorKind::kInvalidArgument, "'" + path + "' is not valid JSON: " + e.what());
  }
  return SnapshotFromJson(v);
}

json SnapshotToJson(const Snapshot& s) {
  json out;
  json types = json::array();
  for (const GpuType& t : s.cluster.types) {
    types.push_back({{"name", t.name}, {"nodes", t.nodes}, {"gpus_per_node", t.gpus_per_node}});
  }
  out["cluster"] = {{"gpu_types", types}};
  json jobs = json::array();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  for (const Job& j : s.jobs) {
    json o = {{"id", j.id}, {"weight", j.weight}, {"state", j.state == JobState::kRunning ? "running" : "pending"},
              {"min_gpus", j.min_gpus}, {"max_gpus", j.max_gpus}, {"gpu_step", j.gpu_step},
              {"min_batch", j.min_batch}, {"min_local_batch", j.min_local_batch},
              {"accumulation", j.accumulation}, {"age_s", j.age_s}, {"rescales", j.rescales}};
    if (j.remaining_s > 0.0) o["remaining_s"] = j.remaining_s;
    if (!j.owner.empty()) o["owner"] = j.owner;
    if (!j.account.empty()) o["account"] = j.account;
    if (j.max_batch != kMax) o["max_batch"] = j.max_batch;
    if (j.max_local_batch != kMax) o["max_local_batch"] = j.max_local_batch;
    if (!j.allowed_types.empty()) o["allowed_gpu_types"] = j.allowed_types;
    if (j.current) o["current"] = {{"gpu_type", j.current->gpu_type}, {"gpus", j.current->gpus}, {"batch", j.current->batch}};
    json opts = json::array();
    for (const Option& op : j.options) {
      opts.push_back({{"gpu_type", op.gpu_type}, {"gpus", op.gpus}, {"batch", op.batch}, {"utility", op.utility}});
    }
    o["options"] = opts;
    jobs.push_back(o);
  }
  out["jobs"] = jobs;
  return out;
}

json PlanToJson(const Plan& plan) {
  auto finite_or_null = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  json out = {{"policy", plan.policy}, {"method", plan.method}, {"objective", plan.objective},
              {"bound", finite_or_null(plan.bound)}, {"gap", finite_or_null(plan.gap)},
              {"solve_ms", plan.solve_ms}, {"exact", plan.exact}};
  json as = json::array();
  for (const Assignment& a : plan.assignments) {
    json o = {{"job_id", a.job_id}, {"pending", a.pending}};
    if (!a.pending) {
      o["gpu_type"] = a.gpu_type;
      o["gpus"] = a.gpus;
      o["batch"] = a.batch;
      o["utility"] = a.utility;
      json pl = json::array();
      for (const NodeSlice& ns : a.placement) pl.push_back({{"node", ns.node}, {"gpus", ns.gpus}});
      o["placement"] = pl;
    }
    as.push_back(o);
  }
  out["assignments"] = as;
  return out;
}

}  // namespace elastic::optimizer
