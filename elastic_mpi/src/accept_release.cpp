// The release of an accept no joiner comes to: the timer on rank 0 and the stand-in's start.
#include "accept_release.h"

#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "elastic/common/log.h"
#include "mpi_stack.h"

extern char** environ;

namespace elastic::mpi::detail {

namespace {

bool Executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string DirOf(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The environment of the stand-in: this rank's own, without what its launch gave it as a member
// of its MPI job (PMIx identity, Open MPI's job and daemon settings), so that it starts as a
// process of its own that reaches the job's rendezvous (mpi_stack.h adds how), as elastic-launch
// starts a group's ranks.
std::vector<std::string> StandInEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    auto starts = [&](std::string_view p) { return v.substr(0, p.size()) == p; };
    if (starts("PMIX_") || starts("OMPI_MCA_ess") || starts("OMPI_MCA_orte_") || starts("OMPI_MCA_pmix") ||
        starts("OMPI_MCA_initial_wdir") || starts("OMPI_MCA_shmem_") || starts("OMPI_FILE_LOCATION") ||
        starts("OMPI_COMM_WORLD") || starts("OMPI_APP_CTX") || starts("OMPI_NUM_APP_CTX") ||
        starts("OMPI_FIRST_RANKS") || starts("OMPI_UNIVERSE_SIZE") || starts("OMPI_COMMAND") ||
        starts("OMPI_ARGV")) {
      continue;
    }
    env.emplace_back(v);
  }
  return env;
}

}  // namespace

std::string JoinReleaseProgram() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&JoinReleaseProgram), &info) != 0 && info.dli_fname != nullptr) {
    char* lib = realpath(info.dli_fname, nullptr);
    const std::string candidate = DirOf(DirOf(lib != nullptr ? lib : info.dli_fname)) + "/bin/elastic-join-release";
    std::free(lib);
    if (Executable(candidate)) return candidate;
  }
  char exe[4096] = {};
  if (const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1); n > 0) {
    const std::string candidate = DirOf(exe) + "/elastic-join-release";
    if (Executable(candidate)) return candidate;
  }
  return "elastic-join-release";  // PATH
}

AcceptRelease::AcceptRelease(std::string port, std::uint32_t group, std::string uri_file, double after_s)
    : port_(std::move(port)), group_(group), uri_file_(std::move(uri_file)), after_s_(after_s) {
  if (after_s_ <= 0) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(after_s_), [this] { return done_; })) return;
    Fire();
  });
}

void AcceptRelease::Fire() {
  if (uri_file_.empty()) {
    Log(LogLevel::kError, "elastic_mpi", "no joiner of group ", group_, " connected within ", after_s_,
        " s and no rendezvous URI is known (ELASTIC_RENDEZVOUS_URI) to release the accept with");
    return;
  }
  const std::string program = JoinReleaseProgram();
  Log(LogLevel::kWarning, "elastic_mpi", "no joiner of group ", group_, " connected within ", after_s_,
      " s (ELASTIC_CONNECT_TIMEOUT_S): releasing the accept with ", program, "; the join is abandoned");
  std::vector<std::string> args = {program, port_, std::to_string(group_), std::to_string(after_s_ + 30)};
  std::vector<std::string> env = StandInEnvironment();
  stack::StandInCommand(uri_file_, &args, &env);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()) != 0) {
    Log(LogLevel::kError, "elastic_mpi", "cannot start ", program, ": the accept stays blocked");
    return;
  }
  child_ = pid;
  fired_ = true;
}

bool AcceptRelease::fired() {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

AcceptRelease::~AcceptRelease() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (child_ > 0) {
    // The stand-in ends by itself after its release; one still waiting (the real joiner came
    // first) is stopped here.
    int status = 0;
    for (int i = 0; i < 50 && waitpid(child_, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (waitpid(child_, &status, WNOHANG) == 0) {
      kill(child_, SIGKILL);
      waitpid(child_, &status, 0);
    }
  }
}

}  // namespace elastic::mpi::detail
