// elasticctl: the staff's tool to look at and steer elasticd.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "elastic/common/cli.h"
#include "elastic/common/exit_codes.h"
#include "elastic/common/site.h"
#include "elastic/common/wire.h"

namespace {

using namespace elastic;
using Json = nlohmann::json;

struct Options {
  std::string controller;
  std::string munge_socket;
  bool json = false;
  bool dry_run = false;
  std::vector<std::string> args;
};

void Usage(std::FILE* out) {
  std::fprintf(out,
               "Usage: elasticctl [--controller HOST:PORT] [--munge-socket PATH] [--json] COMMAND [ARGS]\n\n"
               "Commands:\n"
               "  status               elastic jobs with their GPUs, batch and extension jobs (with Slurm's\n"
               "                       PrivateData=jobs, a plain user's own jobs only)\n"
               "  plan --dry-run       what the optimizer would do now (administrators)\n"
               "  pause JOB            stop rescaling one job (its owner or an administrator)\n"
               "  resume JOB           let it be rescaled again\n"
               "  pause-all            stop every elastic action (administrators)\n"
               "  resume-all           resume them\n"
               "  set-policy NAME      switch the optimizer's policy (administrators)\n"
               "  trial-done JOB TRIAL STEPS [STATE [RESULT]]\n"
               "                       a fused sweep's leader JOB (its owner) reports trial TRIAL (an array\n"
               "                       task index) done after STEPS trial-steps; STATE finished (default),\n"
               "                       stopped or diverged; RESULT where its result or state is\n"
               "  snapshot             print elasticd's view of Slurm and its registry as JSON, for\n"
               "                       `elasticd-bench replay` (administrators)\n\n"
               "Administrators: root, SlurmUser, and users whose Slurm AdminLevel is Operator or Administrator\n"
               "(sacctmgr modify user NAME set adminlevel=Operator).\n"
               "The controller's address comes from the elastic.so line of plugstack.conf (found through\n"
               "slurm.conf, honouring SLURM_CONF), unless --controller is given.\n"
               "Exit codes: 0 ok, 1 failure, 2 usage, 3 controller unreachable, 4 refused by the controller.\n");
}

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "elasticctl: %s\n", message.c_str());
  return code;
}

Result<Json> Call(const Options& o, Json request) {
  config::HostPort address;
  std::string munge = o.munge_socket;
  if (!o.controller.empty()) {
    auto hp = config::ParseHostPort(o.controller, "--controller");
    if (!hp.ok()) return hp.status();
    address = hp.value();
  } else {
    auto site = config::FindSiteAddress();
    if (!site.ok()) return site.status();
    address = site.value().controller;
    if (munge.empty()) munge = site.value().munge_socket;
  }
  wire::ClientOptions opts;
  opts.munge_socket = munge;
  auto client = wire::Client::Connect(address, opts);
  if (!client.ok()) return client.status();
  auto reply = client.value()->Call(std::move(request), std::chrono::seconds(30));
  if (!reply.ok()) return reply.status();
  Status s = wire::ReplyStatus(reply.value());
  if (!s.ok()) return s;
  return reply;
}

int Report(const Result<Json>& r) {
  if (r.ok()) return kExitOk;
  bool unreachable = r.status().kind() == ErrorKind::kUnavailable || r.status().kind() == ErrorKind::kTimeout;
  return Fail(unreachable ? kExitUnreachable : (r.status().kind() == ErrorKind::kNotFound && r.status().message().find("plugstack") != std::string::npos ? kExitFailure : kExitRefused),
              r.status().message());
}

int ShowStatus(const Options& o) {
  auto r = Call(o, {{"type", "status"}});
  if (!r.ok()) return Report(r);
  const Json& reply = r.value();
  if (o.json) {
    Json out{{"jobs", reply["jobs"]}, {"moves", reply.value("moves", Json::array())}, {"paused", reply["paused"]},
             {"policy", reply["policy"]}, {"epoch", reply["epoch"]}};
    if (reply.contains("only_own_jobs")) out["only_own_jobs"] = reply["only_own_jobs"];
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("policy %s, epoch %s every %ss%s\n", reply.value("policy", "?").c_str(), reply["epoch"].dump().c_str(),
              reply["epoch_s"].dump().c_str(), reply.value("paused", false) ? ", ALL ELASTIC ACTIONS PAUSED" : "");
  if (reply.contains("only_own_jobs") && reply["only_own_jobs"].is_string()) {
    std::printf("(%s)\n", reply["only_own_jobs"].get<std::string>().c_str());
  }
  std::printf("%8s %-10s %-10s %-6s %5s %5s %5s %8s %7s %7s %8s %-8s %s\n", "JOBID", "USER", "ACCOUNT", "TYPE", "GPUS",
              "BASE", "MAX", "BATCH", "LR", "NOISE", "RESCALES", "STATE", "EXTENSIONS");
  for (const auto& j : reply["jobs"]) {
    std::string exts;
    for (const auto& e : j["extensions"]) {
      exts += (exts.empty() ? "" : " ") + e["job_id"].dump() + "(" + e.value("node", "?") + ":" + e["gpus"].dump() + "," +
              e.value("state", "?") + ")";
    }
    std::string state = j.value("paused", false) ? "paused" : (j.value("launcher_ready", false) ? "elastic" : "starting");
    // BATCH ends in '*' when elasticd chooses it (--elastic-batch); LR is the runtime's learning-rate
    // factor; NOISE the measured gradient noise scale ('-': not measured yet).
    const std::string batch = (j.value("batch", 0) > 0 ? j["batch"].dump() : "-") + (j.value("batch_elastic", false) ? "*" : "");
    char lr[32], noise[32] = "-";
    std::snprintf(lr, sizeof lr, "x%.2f", j.value("lr_factor", 1.0));
    if (j.contains("noise_scale") && j["noise_scale"].is_number()) {
      std::snprintf(noise, sizeof noise, "%.0f", j["noise_scale"].get<double>());
    } else if (j.contains("noise_scale") && j["noise_scale"].is_string()) {
      std::snprintf(noise, sizeof noise, "%s", j["noise_scale"].get<std::string>().c_str());
    }
    std::printf("%8s %-10s %-10s %-6s %5s %5s %5s %8s %7s %7s %8s %-8s %s\n", j["job_id"].dump().c_str(),
                j.value("user", "").c_str(), j.value("account", "").c_str(), j.value("gpu_type", "").c_str(),
                j["gpus"].dump().c_str(), j["base_gpus"].dump().c_str(), j["max_gpus"].dump().c_str(), batch.c_str(), lr,
                noise, j["rescales"].dump().c_str(), state.c_str(), exts.empty() ? "-" : exts.c_str());
  }
  // Moves to another GPU type in flight (a job Slurm holds requeued is listed here only).
  for (const auto& m : reply.value("moves", Json::array())) {
    std::printf("job %s: moving from %s to %s (%s)\n", m["job_id"].dump().c_str(), m.value("from", "?").c_str(),
                m.value("to", "?").c_str(), m.value("phase", "?").c_str());
  }
  return kExitOk;
}

int Plan(const Options& o) {
  if (!o.dry_run) return Fail(kExitUsage, "plan only has a --dry-run form: the controller enacts plans itself");
  auto r = Call(o, {{"type", "plan"}, {"dry_run", true}});
  if (!r.ok()) return Report(r);
  std::printf("%s\n", r.value()["plan"].dump(o.json ? -1 : 2).c_str());
  return kExitOk;
}

int JobCommand(const Options& o, const char* type) {
  if (o.args.size() != 2) return Fail(kExitUsage, std::string(o.args[0]) + " needs one JOB id");
  char* end = nullptr;
  unsigned long job = std::strtoul(o.args[1].c_str(), &end, 10);
  if (end == o.args[1].c_str() || *end != '\0' || job == 0) return Fail(kExitUsage, "'" + o.args[1] + "' is not a job id");
  auto r = Call(o, {{"type", type}, {"job", job}});
  if (!r.ok()) return Report(r);
  std::printf("job %lu: %s\n", job, std::string(type) == "pause" ? "paused" : "resumed");
  return kExitOk;
}

// A decimal count (0 allowed), or nothing.
std::optional<unsigned long> Count(const std::string& text) {
  char* end = nullptr;
  if (text.empty() || text[0] == '-') return std::nullopt;
  unsigned long v = std::strtoul(text.c_str(), &end, 10);
  if (*end != '\0') return std::nullopt;
  return v;
}

int TrialDone(const Options& o) {
  if (o.args.size() < 4 || o.args.size() > 6) {
    return Fail(kExitUsage, "trial-done needs JOB TRIAL STEPS [STATE [RESULT]] (see --help)");
  }
  auto job = Count(o.args[1]);
  auto trial = Count(o.args[2]);
  auto steps = Count(o.args[3]);
  if (!job || *job == 0) return Fail(kExitUsage, "'" + o.args[1] + "' is not a job id");
  if (!trial) return Fail(kExitUsage, "'" + o.args[2] + "' is not an array task index");
  if (!steps) return Fail(kExitUsage, "'" + o.args[3] + "' is not a number of steps");
  Json request{{"type", "trial_done"}, {"job", *job}, {"trial", *trial}, {"steps", *steps}};
  if (o.args.size() > 4) request["state"] = o.args[4];
  if (o.args.size() > 5) request["result"] = o.args[5];
  auto r = Call(o, std::move(request));
  if (!r.ok()) return Report(r);
  std::printf("job %lu: trial %lu recorded%s\n", *job, *trial,
              r.value().value("task_ended", false) ? ", its array task ended" : "");
  return kExitOk;
}

int Simple(const Options& o, Json request, const char* done) {
  auto r = Call(o, std::move(request));
  if (!r.ok()) return Report(r);
  std::printf("%s\n", done);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // elasticd or munged gone mid-request: an error message and exit 3, not a silent death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (std::optional<int> done = cli::HelpOrVersion(a, "elasticctl", Usage)) return *done;
    if (a == "--json") {
      o.json = true;
    } else if (a == "--dry-run") {
      o.dry_run = true;
    } else if ((a == "--controller" || a == "--munge-socket") && i + 1 < argc) {
      (a == "--controller" ? o.controller : o.munge_socket) = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      return Fail(kExitUsage, "unknown option '" + a + "' (see --help)");
    } else {
      o.args.push_back(a);
    }
  }
  if (o.args.empty()) {
    Usage(stderr);
    return kExitUsage;
  }
  const std::string& cmd = o.args[0];
  auto no_args = [&]() { return o.args.size() == 1; };
  if (cmd == "status" && no_args()) return ShowStatus(o);
  if (cmd == "plan" && no_args()) return Plan(o);
  if (cmd == "pause") return JobCommand(o, "pause");
  if (cmd == "resume") return JobCommand(o, "resume");
  if (cmd == "pause-all" && no_args()) return Simple(o, {{"type", "pause_all"}}, "every elastic action is paused");
  if (cmd == "resume-all" && no_args()) return Simple(o, {{"type", "resume_all"}}, "elastic actions resumed");
  if (cmd == "snapshot" && no_args()) {
    auto r = Call(o, {{"type", "snapshot"}});
    if (!r.ok()) return Report(r);
    std::printf("%s\n", r.value()["snapshot"].dump().c_str());
    return kExitOk;
  }
  if (cmd == "trial-done") return TrialDone(o);
  if (cmd == "set-policy" && o.args.size() == 2) {
    return Simple(o, {{"type", "set_policy"}, {"policy", o.args[1]}}, ("policy set to " + o.args[1]).c_str());
  }
  return Fail(kExitUsage, "unknown command or wrong arguments: '" + cmd + "' (see --help)");
}
