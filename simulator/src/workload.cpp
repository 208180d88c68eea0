#include "elastic/simulator/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "csv.h"

namespace elastic::simulator {
namespace {

Status CheckApp(const csv::Table& t, size_t r, const std::string& app, const AppTable& apps) {
  if (apps.count(app)) return Status::Ok();
  std::string known;
  for (const auto& [n, a] : apps) known += (known.empty() ? "" : ", ") + n;
  return Status(ErrorKind::kInvalidArgument,
                csv::Where(t, r, "application") + ": unknown application '" + app + "' (known: " + known + ")");
}

}  // namespace

Result<std::vector<JobSpec>> ParsePolluxWorkload(const std::string& text, const std::string& path,
                                                 const AppTable& apps) {
  Result<csv::Table> tr = csv::Parse(text, path);
  if (!tr.ok()) return tr.status();
  const csv::Table& t = tr.value();
  const int cn = t.Column("name"), ct = t.Column("time"), ca = t.Column("application"),
            cr = t.Column("num_replicas"), cb = t.Column("batch_size");
  if (cn < 0 || ct < 0 || ca < 0 || cr < 0 || cb < 0) {
    return Status(ErrorKind::kInvalidArgument, path + ": expected columns name,time,application,num_replicas,batch_size");
  }
  std::vector<JobSpec> jobs;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    JobSpec j;
    j.name = t.rows[r][static_cast<size_t>(cn)];
    j.app = t.rows[r][static_cast<size_t>(ca)];
    if (Status s = CheckApp(t, r, j.app, apps); !s.ok()) return s;
    Result<double> time = csv::Number(t, r, ct);
    if (!time.ok()) return time.status();
    Result<int64_t> reps = csv::Integer(t, r, cr), batch = csv::Integer(t, r, cb);
    if (!reps.ok()) return reps.status();
    if (!batch.ok()) return batch.status();
    if (time.value() < 0.0) return Status(ErrorKind::kInvalidArgument, csv::Where(t, r, "time") + ": must be >= 0");
    if (reps.value() < 1 || reps.value() > 100000) {
      return Status(ErrorKind::kInvalidArgument, csv::Where(t, r, "num_replicas") + ": must be >= 1");
    }
    if (batch.value() < 1) return Status(ErrorKind::kInvalidArgument, csv::Where(t, r, "batch_size") + ": must be >= 1");
    j.arrival_s = time.value();
    j.req_gpus = static_cast<int>(reps.value());
    j.req_batch = batch.value();
    jobs.push_back(std::move(j));
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const JobSpec& a, const JobSpec& b) { return a.arrival_s < b.arrival_s; });
  return jobs;
}

Result<std::vector<JobSpec>> ReadPolluxWorkload(const std::string& path, const AppTable& apps) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorKind::kNotFound, path + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ParsePolluxWorkload(ss.str(), path, apps);
}

std::string MapByGpuTime(double gpu_time_s, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> coin(0, 1);
  const double h = gpu_time_s / 3600.0;
  if (h < 1.0) return coin(rng) ? "ncf" : "cifar10";
  if (h < 10.0) return coin(rng) ? "bert" : "deepspeech2";
  if (h < 100.0) return "yolov3";
  return "imagenet";
}

JobSpec RigidRequest(const Application& app, int gpus) {
  JobSpec j;
  j.app = app.name;
  gpus = std::max(1, std::min<int>(gpus, static_cast<int>(app.max_batch / app.min_local_batch)));
  std::vector<int> placement;
  for (int left = gpus; left > 0; left -= 4) placement.push_back(std::min(left, 4));
  double best = std::numeric_limits<double>::infinity();
  int64_t best_batch = app.init_batch;
  for (const auto& [b, curve] : app.curves) {
    const double local = std::ceil(static_cast<double>(b) / gpus);
    if (local < static_cast<double>(app.min_local_batch) || local > static_cast<double>(app.max_local_batch)) continue;
    const double jct = app.IterationsToFinish(b) * app.StepTime(placement, local).step;
    if (jct < best) {
      best = jct;
      best_batch = b;
    }
  }
  j.req_gpus = gpus;
  j.req_batch = best_batch;
  return j;
}

Result<double> ParseTimestamp(const std::string& s) {
  std::tm tm{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  char sep = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d", &y, &mo, &d, &sep, &h, &mi, &se) != 7 ||
      (sep != ' ' && sep != 'T')) {
    return Status(ErrorKind::kInvalidArgument, "expected a time YYYY-MM-DD HH:MM:SS, got '" + s + "'");
  }
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  return static_cast<double>(timegm(&tm));
}

Result<std::vector<JobSpec>> ReadPhillyWindow(const std::string& path, const PhillyWindow& w, const AppTable& apps) {
  Result<csv::Table> tr = csv::Read(path);
  if (!tr.ok()) return tr.status();
  const csv::Table& t = tr.value();
  const int cts = t.Column("timestamp"), cg = t.Column("num_gpus"), cgt = t.Column("gpu_time"), cvc = t.Column("cluster");
  if (cts < 0 || cg < 0 || cgt < 0) {
    return Status(ErrorKind::kInvalidArgument, path + ": expected columns timestamp,num_gpus,gpu_time");
  }
  struct Row {
    double ts;
    int gpus;
    double gpu_time;
    std::string vc;
  };
  std::vector<Row> rows;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    Result<double> ts = ParseTimestamp(t.rows[r][static_cast<size_t>(cts)]);
    if (!ts.ok()) return Status(ErrorKind::kInvalidArgument, csv::Where(t, r, "timestamp") + ": " + ts.status().message());
    Result<int64_t> g = csv::Integer(t, r, cg);
    if (!g.ok()) return g.status();
    Result<double> gt = csv::Number(t, r, cgt);
    if (!gt.ok()) return gt.status();
    rows.push_back({ts.value(), static_cast<int>(std::max<int64_t>(1, g.value())), gt.value(),
                    cvc < 0 ? std::string() : t.rows[r][static_cast<size_t>(cvc)]});
  }
  if (rows.empty()) return std::vector<JobSpec>{};
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ts < b.ts; });
  double start = rows.front().ts;
  if (!w.start.empty()) {
    Result<double> s = ParseTimestamp(w.start);
    if (!s.ok()) return Status(ErrorKind::kInvalidArgument, "--philly-start: " + s.status().message());
    start = s.value();
  }
  const double end = start + w.hours * 3600.0;
  std::vector<Row> in;
  for (const Row& r : rows) {
    if (r.ts >= start && r.ts < end) in.push_back(r);
  }
  std::mt19937_64 rng(w.seed);
  if (w.max_jobs > 0 && in.size() > w.max_jobs) {
    std::vector<size_t> idx(in.size());
    std::iota(idx.begin(), idx.end(), size_t{0});
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(w.max_jobs);
    std::sort(idx.begin(), idx.end());
    std::vector<Row> kept;
    for (size_t i : idx) kept.push_back(in[i]);
    in = std::move(kept);
  }
  std::vector<JobSpec> jobs;
  for (const Row& r : in) {
    const std::string app = MapByGpuTime(r.gpu_time, rng);
    auto it = apps.find(app);
    if (it == apps.end()) return Status(ErrorKind::kInvalidArgument, "application '" + app + "' not loaded");
    JobSpec j = RigidRequest(*it->second, std::min(r.gpus, w.max_gpus));
    j.name = app + "-" + std::to_string(jobs.size());
    j.app = app;
    j.arrival_s = r.ts - start;
    j.user = r.vc;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

namespace {

// One job of an accounting export, in either form.
struct AccountedJob {
  std::string id;
  double submit;
  double elapsed;
  int gpus;
};

// The rule shared by both export forms: sorted by submission, arrivals relative to the first,
// the model by GPU-time (MapByGpuTime with `seed`), the request as the job ran (capped).
Result<std::vector<JobSpec>> JobsFromAccounting(std::vector<AccountedJob> rows, const AppTable& apps, int max_gpus,
                                                uint64_t seed) {
  std::stable_sort(rows.begin(), rows.end(),
                   [](const AccountedJob& a, const AccountedJob& b) { return a.submit < b.submit; });
  std::vector<JobSpec> jobs;
  std::mt19937_64 rng(seed);
  for (const AccountedJob& r : rows) {
    const std::string app = MapByGpuTime(r.elapsed * r.gpus, rng);
    auto it = apps.find(app);
    if (it == apps.end()) return Status(ErrorKind::kInvalidArgument, "application '" + app + "' not loaded");
    JobSpec j = RigidRequest(*it->second, std::min(r.gpus, max_gpus));
    j.app = app;
    j.name = r.id;
    j.arrival_s = r.submit - rows.front().submit;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

// `sacct --json` (Slurm 22.05 and later): {"jobs": [{"job_id", "name", "time": {"submission",
// "elapsed"}, "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": N}, ...]}}, ...]}.
// Jobs that never ran (no allocated GPUs) are skipped, as in the -P form.
Result<std::vector<AccountedJob>> ParseSacctJson(const std::string& text, const std::string& path) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status(ErrorKind::kInvalidArgument, path + ": not valid JSON (expected sacct --json)");
  if (!doc.is_object() || !doc.contains("jobs") || !doc["jobs"].is_array()) {
    return Status(ErrorKind::kInvalidArgument, path + ": no \"jobs\" array (expected sacct --json)");
  }
  std::vector<AccountedJob> rows;
  const auto& jobs = doc["jobs"];
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    const std::string where = path + ": jobs[" + std::to_string(i) + "]";
    if (!j.is_object()) return Status(ErrorKind::kInvalidArgument, where + ": not an object");
    auto integer = [&](const nlohmann::json& v, const char* what) -> Result<double> {
      if (!v.is_number_integer() && !v.is_number_unsigned()) {
        return Status(ErrorKind::kInvalidArgument, where + ": " + what + " is not an integer");
      }
      const double d = v.get<double>();
      if (d < 0) return Status(ErrorKind::kInvalidArgument, where + ": " + what + " must be >= 0");
      return d;
    };
    int gpus = 0;
    const nlohmann::json* tres = nullptr;
    if (j.contains("tres") && j["tres"].is_object() && j["tres"].contains("allocated")) tres = &j["tres"]["allocated"];
    if (tres != nullptr && tres->is_array()) {
      for (const auto& t : *tres) {
        // {"type": "gres", "name": "gpu", "count": 4}; the typed "gpu:a100" entry repeats the count.
        if (!t.is_object() || t.value("type", nlohmann::json()) != "gres" || t.value("name", nlohmann::json()) != "gpu") {
          continue;
        }
        auto count = integer(t.value("count", nlohmann::json()), "tres.allocated gres/gpu count");
        if (!count.ok()) return count.status();
        if (count.value() > 1e6) return Status(ErrorKind::kInvalidArgument, where + ": GPU count too large");
        gpus = static_cast<int>(count.value());
      }
    }
    if (gpus == 0) continue;  // CPU-only jobs and jobs that never started do not compete for GPUs
    if (!j.contains("time") || !j["time"].is_object()) {
      return Status(ErrorKind::kInvalidArgument, where + ": no \"time\" object");
    }
    auto submit = integer(j["time"].value("submission", nlohmann::json()), "time.submission");
    if (!submit.ok()) return submit.status();
    auto elapsed = integer(j["time"].value("elapsed", nlohmann::json()), "time.elapsed");
    if (!elapsed.ok()) return elapsed.status();
    std::string id = std::to_string(i);
    if (j.contains("job_id") && (j["job_id"].is_number_unsigned() || j["job_id"].is_number_integer())) {
      id = std::to_string(j["job_id"].get<int64_t>());
    }
    if (j.contains("name") && j["name"].is_string() && !j["name"].get<std::string>().empty()) {
      id += "-" + j["name"].get<std::string>();
    }
    rows.push_back({id, submit.value(), elapsed.value(), gpus});
  }
  return rows;
}

}  // namespace

Result<std::vector<JobSpec>> ParseSacct(const std::string& text, const std::string& path, const AppTable& apps,
                                        int max_gpus, uint64_t seed) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    auto rows = ParseSacctJson(text, path);
    if (!rows.ok()) return rows.status();
    return JobsFromAccounting(std::move(rows).value(), apps, max_gpus, seed);
  }
  Result<csv::Table> tr = csv::Parse(text, path, '|');
  if (!tr.ok()) return tr.status();
  const csv::Table& t = tr.value();
  const int cid = t.Column("JobID"), cname = t.Column("JobName"), csub = t.Column("Submit"),
            cel = t.Column("ElapsedRaw"), ctres = t.Column("AllocTRES");
  if (csub < 0 || cel < 0 || ctres < 0) {
    return Status(ErrorKind::kInvalidArgument,
                  path + ": expected sacct -P columns Submit, ElapsedRaw and AllocTRES (JobID, JobName optional)");
  }
  std::vector<AccountedJob> rows;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const std::string& tres = t.rows[r][static_cast<size_t>(ctres)];
    int gpus = 0;
    for (const std::string& item : csv::Split(tres, ',')) {
      // gres/gpu=4 or gres/gpu:a100=4 (the typed form repeats the count: take the untyped one).
      if (item.rfind("gres/gpu=", 0) == 0) {
        char* end = nullptr;
        const long v = std::strtol(item.c_str() + 9, &end, 10);
        if (*end != '\0' || v < 0) {
          return Status(ErrorKind::kInvalidArgument, csv::Where(t, r, "AllocTRES") + ": bad GPU count in '" + item + "'");
        }
        gpus = static_cast<int>(v);
      }
    }
    if (gpus == 0) continue;  // CPU-only jobs do not compete for GPUs
    Result<double> sub = ParseTimestamp(t.rows[r][static_cast<size_t>(csub)]);
    if (!sub.ok()) return Status(ErrorKind::kInvalidArgument, csv::Where(t, r, "Submit") + ": " + sub.status().message());
    Result<double> el = csv::Number(t, r, cel);
    if (!el.ok()) return el.status();
    if (el.value() < 0.0) return Status(ErrorKind::kInvalidArgument, csv::Where(t, r, "ElapsedRaw") + ": must be >= 0");
    std::string id = cid >= 0 ? t.rows[r][static_cast<size_t>(cid)] : std::to_string(r);
    if (cname >= 0 && !t.rows[r][static_cast<size_t>(cname)].empty()) id += "-" + t.rows[r][static_cast<size_t>(cname)];
    rows.push_back({id, sub.value(), el.value(), gpus});
  }
  return JobsFromAccounting(std::move(rows), apps, max_gpus, seed);
}

Result<std::vector<JobSpec>> ReadSacct(const std::string& path, const AppTable& apps, int max_gpus, uint64_t seed) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorKind::kNotFound, path + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ParseSacct(ss.str(), path, apps, max_gpus, seed);
}

}  // namespace elastic::simulator
