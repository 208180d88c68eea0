#include "fixture.h"

#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "db.h"

namespace elastic::report::testing {

double T10() {
  struct tm tm {};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 10;
  tm.tm_mday = 20;
  tm.tm_hour = 10;
  tm.tm_isdst = -1;
  return static_cast<double>(mktime(&tm));
}

std::string SacctText() {
  return "100|alice|physics|gpu|billing=1,cpu=1,gres/gpu:a100=2,gres/gpu=2,node=1|3600|2026-11-20T09:50:00|"
         "2026-11-20T09:50:00|2026-11-20T10:00:00|2026-11-20T11:00:00|COMPLETED||100|train\n"
         "200|bob|chem|gpu|billing=1,cpu=1,gres/gpu:a100=2,gres/gpu=2,node=1|7200|2026-11-20T08:30:00|"
         "2026-11-20T09:00:00|2026-11-20T10:00:00|2026-11-20T12:00:00|COMPLETED||200|elastic train\n"
         "201|bob|chem|gpu|billing=1,cpu=1,gres/gpu:a100=4,gres/gpu=4,node=1|1800|2026-11-20T10:29:00|"
         "2026-11-20T10:29:00|2026-11-20T10:30:00|2026-11-20T11:00:00|CANCELLED by 0|elastic-ext parent=200 group=1|201|"
         "elastic-ext:200:1\n"
         "202|bob|chem|gpu|billing=1,cpu=1,gres/gpu:a100=2,gres/gpu=2,node=1|1800|2026-11-20T10:44:00|"
         "2026-11-20T10:44:00|2026-11-20T10:45:00|2026-11-20T11:15:00|CANCELLED by 0|elastic-ext parent=200 group=2|202|"
         "elastic-ext:200:2\n"
         "\n"
         "300|carol|physics|gpu|billing=1,cpu=1,gres/gpu=1,node=1|3600|2026-11-20T12:00:00|2026-11-20T12:00:00|"
         "2026-11-20T12:00:00|2026-11-20T13:00:00|COMPLETED||300|elastic-ext:100:1\n"
         "400|dave|physics|cpu|billing=4,cpu=4,node=1|600|2026-11-20T12:00:00|2026-11-20T12:00:00|"
         "2026-11-20T12:00:00|2026-11-20T12:10:00|COMPLETED||400|cpu|only\n"
         "500|erin|bio|gpu|billing=1,cpu=1,gres/gpu=1,node=1|3600|2026-11-20T23:00:00|2026-11-20T23:00:00|"
         "2026-11-20T23:00:00|Unknown|RUNNING||500|long\n";
}

void MakeStateDb(const std::string& path, bool samples) {
  std::remove(path.c_str());
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  auto opened = controller::Database::Open(path);
  auto& db = *opened.value();
  double t = T10();
  using controller::SqlValue;
  nlohmann::json data{{"id", 200}, {"uid", 1001}, {"user", "bob"}, {"account", "chem"}, {"partition", "gpu"},
                      {"gpu_type", "a100"}, {"base_gpus", 2}, {"state", "ended"}};
  data["samples"] = nlohmann::json::array();
  if (samples) {
    data["samples"].push_back({1, 2, 32.0, 0.1});   // 640 samples/s
    data["samples"].push_back({1, 2, 32.0, 0.1});
    data["samples"].push_back({2, 6, 32.0, 0.12});  // 1600 samples/s
  }
  db.Run("INSERT INTO jobs (job_id, uid, user, account, state, registered_at, ended_at, data) VALUES (?,?,?,?,?,?,?,?)",
         {int64_t{200}, int64_t{1001}, std::string("bob"), std::string("chem"), std::string("ended"), t + 5,
          t + 7200, data.dump()});
  struct Iv {
    double a, b;
    int64_t gpus;
  };
  for (Iv iv : {Iv{0, 1800, 2}, Iv{1800, 2700, 6}, Iv{2700, 3600, 8}, Iv{3600, 4500, 4}, Iv{4500, 7200, 2}}) {
    db.Run("INSERT INTO intervals (job_id, start, end, gpus, gpu_type) VALUES (200, ?, ?, ?, 'a100')",
           {t + iv.a, t + iv.b, iv.gpus});
  }
  struct Rs {
    const char* kind;
    int64_t grp, from, to;
    double at;
    int64_t ok;
    double pause;
  };
  for (Rs r : {Rs{"grow", 1, 2, 6, 1800, 1, 2}, Rs{"grow", 2, 6, 8, 2700, 1, 3}, Rs{"shrink", 1, 8, 4, 3600, 1, 1},
               Rs{"shrink", 2, 4, 2, 4500, 1, 1}, Rs{"grow", 3, 2, 4, 5000, 0, 0}}) {
    db.Run("INSERT INTO rescales (job_id, kind, grp, from_gpus, to_gpus, requested_at, done_at, ok, pause_s, phases) "
           "VALUES (200, ?, ?, ?, ?, ?, ?, ?, ?, '{}')",
           {std::string(r.kind), r.grp, r.from, r.to, t + r.at - 10, t + r.at, r.ok, r.pause});
  }
  db.Run("INSERT INTO extensions (parent, grp, slurm_job, node, gpu_type, gpus, account, token, state, created_at) "
         "VALUES (200, 1, 201, 'n2', 'a100', 4, 'chem', 'x', 'left', ?), (200, 2, 202, 'n3', 'a100', 2, 'chem', 'y', "
         "'left', ?)",
         {t + 1700, t + 2600});
}

}  // namespace elastic::report::testing
