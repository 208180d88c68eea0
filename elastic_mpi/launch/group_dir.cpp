// The group directory of ranks launched through a DVM (group_dir.h).
#include "group_dir.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string_view>

#include "private_file.h"

extern char** environ;

namespace elastic::launch {

namespace {

constexpr char kEnvironmentFile[] = "environment";
constexpr char kHostFile[] = "host";  // the launcher's host, which wrote the environment

std::map<std::string, std::string> CurrentEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string_view::npos) env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  return env;
}

// What the DVM sets for the rank itself (its identity, its job's layout): kept as the DVM set it.
bool SetByTheDvm(std::string_view name) {
  return name.rfind("PMIX_", 0) == 0 || name.rfind("PRTE_", 0) == 0 || name.rfind("OMPI_", 0) == 0;
}

// The PMIx server and launcher of the process itself: only the DVM's. The launcher's own (it may
// run in an `srun` step, whose PMIx server is Slurm's) never reach a rank: a rank that took them
// would talk to the launcher's PMIx server, not to its DVM daemon (a relaunched world's ranks on
// another node hung in MPI start-up so).
bool OnlyTheDvms(std::string_view name) { return name.rfind("PMIX_", 0) == 0 || name.rfind("PRTE_", 0) == 0; }

// What belongs to the node a process runs on: its Slurm job and step (on another node, those of
// the job that holds that node), its devices, its scratch directory. A rank on another host than
// the launcher's (a relaunched world's, started there through an agent) keeps its own.
bool NodeLocal(std::string_view name) {
  static constexpr std::string_view kNames[] = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                                                "GPU_DEVICE_ORDINAL",   "ZE_AFFINITY_MASK",     "TMPDIR",
                                                "HOSTNAME"};
  if (name.rfind("SLURM_", 0) == 0 || name.rfind("SLURMD_", 0) == 0) return true;
  for (std::string_view n : kNames) {
    if (name == n) return true;
  }
  return false;
}

// This host's name: a rank's pid file names its host, since a relaunched world's ranks on other
// nodes record theirs in the same (shared) directory and their pids mean nothing here.
std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace

bool WriteGroupDir(const std::string& dir, const std::vector<std::string>& changes) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  std::map<std::string, std::string> env = CurrentEnvironment();
  for (const std::string& c : changes) {
    const auto eq = c.find('=');
    if (eq == std::string::npos) env.erase(c);
    else env[c.substr(0, eq)] = c.substr(eq + 1);
  }
  env.erase("SLURM_STEPID");
  env.erase("SLURM_STEP_ID");
  std::string text;  // NAME=VALUE entries, each ended by a NUL (values may hold newlines)
  for (const auto& [name, value] : env) text += name + "=" + value + '\0';
  return WritePrivateFile(dir + "/" + kHostFile, HostName()) && WritePrivateFile(dir + "/" + kEnvironmentFile, text);
}

bool AdoptGroupDir(const std::string& dir) {
  std::ifstream in(dir + "/" + kEnvironmentFile, std::ios::binary);
  if (!in) return false;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, std::string> group;
  for (std::size_t p = 0; p < text.size();) {
    std::size_t end = text.find('\0', p);
    if (end == std::string::npos) end = text.size();
    const std::string kv = text.substr(p, end - p);
    if (const auto eq = kv.find('='); eq != std::string::npos && eq > 0) group[kv.substr(0, eq)] = kv.substr(eq + 1);
    p = end + 1;
  }
  std::ifstream host_in(dir + "/" + kHostFile);
  std::string writer;
  std::getline(host_in, writer);
  const bool elsewhere = !writer.empty() && writer != HostName();
  const auto own = [&](const std::string& name) { return SetByTheDvm(name) || (elsewhere && NodeLocal(name)); };
  for (const auto& [name, value] : CurrentEnvironment()) {
    if (!own(name) && group.count(name) == 0) unsetenv(name.c_str());
  }
  for (const auto& [name, value] : group) {
    if (OnlyTheDvms(name)) continue;
    if (own(name) && (std::getenv(name.c_str()) != nullptr || (elsewhere && NodeLocal(name)))) continue;
    setenv(name.c_str(), value.c_str(), 1);
  }
  // The pid file's name is PID@HOST; its content is nothing.
  return WritePrivateFile(dir + "/" + std::to_string(getpid()) + "@" + HostName(), "");
}

void SignalGroup(const std::string& dir, int sig) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  const std::string here = "@" + HostName();
  while (const dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    // Ranks on this host only (those elsewhere end with the DVM's daemons there).
    if (pid > 1 && end != nullptr && here == end) kill(static_cast<pid_t>(pid), sig);
  }
  closedir(d);
}

void RemoveGroupDir(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        unlink((dir + "/" + e->d_name).c_str());
      }
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

}  // namespace elastic::launch
