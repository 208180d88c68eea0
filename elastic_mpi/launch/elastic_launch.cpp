// elastic-launch: what job scripts run in place of mpirun/torchrun (one per node):
//
//   srun --ntasks-per-node=1 elastic-launch -n 4 -- ./train ARGS...          (the job's nodes)
//   elastic-launch --join -n 4 -- ./train ARGS...                            (an extension job)
//
// On the leader node (node group 0, not --join) it first starts the job's rendezvous as the job's
// user, and writes its URI to <run dir>/rendezvous.uri (mode 700 directory); other launchers wait
// for that file. Which rendezvous, and how the ranks are started, is the MPI stack adapter's
// (src/mpi_stack.h), chosen by the MPI the runtime is built against:
//   Open MPI 4: `ompi-server --no-daemonize --report-uri`; this node's ranks are direct children
//     (Open MPI 4.1.4 ranks under orted crash at connect/accept): one rank as an MPI singleton,
//     several through a node-local mpirun that never asks Slurm for daemons (--mca ras ^slurm
//     --mca plm ^slurm);
//   Open MPI 5: the job's PRRTE DVM (`prte --report-uri`), every group's ranks launched into it
//     with `mpirun --dvm`; a job's world on several nodes as one such launch by the first node's
//     launcher, the others holding their nodes (spanning_world.h).
// Signals (SIGTERM from scancel or preemption, SIGINT, SIGUSR1) are forwarded to the ranks; the
// launcher exits with the ranks' exit status and stops the rendezvous.
//
// Every rank also gets torchrun's environment (torch_env.h: RANK, LOCAL_RANK, WORLD_SIZE,
// MASTER_ADDR, ...), so that an unmodified torch.distributed script runs at the job's base size.
// Under mpirun the per-rank values come from the launcher itself, re-executed in front of the
// program in its hidden mode `--rank-shim OFFSET`.
//
// Over 600 lines, on purpose: main() is one sequence (options, rendezvous, registration, the
// ranks' launch, signal forwarding, relaunches, exit) whose steps share the parsed options and
// the rendezvous state; the pieces with a life of their own are in this folder already
// (group_dir, relauncher, torch_env, extension_env, join_release, private_file, spanning_world).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "controller_link.h"
#include "group_dir.h"
#include "mpi_stack.h"
#include "elastic/common/env_vars.h"
#include "extension_env.h"
#include "elastic/common/exit_codes.h"
#include "elastic/common/join_token.h"
#include "elastic/common/log.h"
#include "elastic_mpi/topology.h"
#include "elastic_mpi/tunables.h"
#include "private_file.h"
#include "relaunch.h"
#include "relauncher.h"
#include "spanning_world.h"
#include "torch_env.h"

namespace {

// Exit codes of the launcher itself (the ranks' own status is passed through otherwise).
using elastic::kExitLaunch;
using elastic::kExitRendezvous;
using elastic::kExitUsage;

struct Options {
  int ranks = 0;  // 0: the job's GPUs on this node (SLURM_GPUS_ON_NODE), else 1
  std::vector<std::string> exports;  // --export: more variables an extension job gets
  bool join = false;
  bool hold = false;          // --join --hold: hold the node for a relaunched world (HoldNode)
  std::vector<std::string> rank_agent;  // --join --rank-agent WORDS (mpi_stack.h, GroupLaunch)
  bool oversubscribe = false;
  bool topology = false;      // print the node's topology as JSON and exit
  std::string run_dir;
  std::string uri_file;       // --uri / ELASTIC_RENDEZVOUS_URI (join mode)
  std::string mpirun = "mpirun";
  std::string server = elastic::mpi::stack::DefaultServerProgram();  // the rendezvous (mpi_stack.h)
  double wait_s = 60;         // for the URI file
  std::vector<std::string> program;
};

void Usage(std::FILE* out = stderr) {
  std::fprintf(out,
               "Usage: elastic-launch [-n RANKS] [--oversubscribe] [--export VARS] [--run-dir DIR] -- PROGRAM [ARGS...]\n"
               "       elastic-launch --join [--uri FILE|URI] [options] -- PROGRAM [ARGS...]\n"
               "       elastic-launch --topology\n"
               "       elastic-launch --help\n\n"
               "What job scripts run in place of mpirun or torchrun, one per node:\n"
               "    srun --ntasks-per-node=1 elastic-launch -- ./train ARGS...\n"
               "It starts this node's ranks as its own children (one per GPU of the job on the node), starts the\n"
               "job's MPI rendezvous (%s) on the first node, merges the node groups into one world,\n"
               "and in an elastic job registers with elasticd so that extension jobs can join.\n\n"
               "  -n, --ranks N        ranks on this node (default: the job's GPUs here, SLURM_GPUS_ON_NODE, else 1)\n"
               "  --join               start a group that joins a running job (extension jobs; elasticd uses it)\n"
               "  --hold               with --join: start no ranks; tell elasticd the node is ready and hold it until\n"
               "                       SIGTERM, while the job's world, started again over it, runs ranks there\n"
               "                       (elasticd uses it where the MPI grows onto other nodes by relaunch)\n"
               "  --rank-agent WORDS   with --join: the command (words split at spaces) that runs each rank inside this\n"
               "                       extension job where the rendezvous's daemon starts the ranks in another job\n"
               "                       (Open MPI 5; elasticd passes an srun into the extension job)\n"
               "  --uri FILE|URI       the rendezvous to join (default: ELASTIC_RENDEZVOUS_URI)\n"
               "  --run-dir DIR        the job's private directory (default: ELASTIC_RUN_DIR, else\n"
               "                       <working directory>/.elastic/<job>)\n"
               "  --oversubscribe      more ranks than cores (small test machines); idle ranks give their core away\n"
               "  --export VARS        comma-separated node-specific variables extension jobs get too (they get this\n"
               "                       job's environment but Slurm's, MPI's and each node's own: GPU visibility,\n"
               "                       TMPDIR, HOME, ...)\n"
               "  --mpirun PATH        mpirun to use for several ranks (default: mpirun)\n"
               "  --rendezvous-server PATH  the rendezvous server to start (default: %s; also --ompi-server)\n"
               "  --wait S             seconds to wait for the rendezvous URI, and for a world started again\n"
               "                       by a relaunch to take its state (default 60)\n"
               "  --topology           print this node's topology (cores, NUMA nodes, GPUs) as JSON and exit\n\n"
               "Exit status: the ranks' own; 2 usage, 69 no rendezvous, 71 the ranks could not be started.\n",
               elastic::mpi::stack::RendezvousKind(), elastic::mpi::stack::DefaultServerProgram());
}

volatile sig_atomic_t g_child_group = 0;
// Signals to forward by the ranks' pids (mpi_stack.h's RanksOutsideLauncher): the handler only notes
// them, the launcher's wait loop sends them.
volatile sig_atomic_t g_by_pid = 0;
volatile sig_atomic_t g_pending[3] = {0, 0, 0};  // SIGTERM, SIGINT, SIGUSR1
constexpr int kForwarded[3] = {SIGTERM, SIGINT, SIGUSR1};

// SIGTERM or SIGINT reached the launcher: the job is ending, no relaunch after its world.
volatile sig_atomic_t g_terminating = 0;

void Forward(int sig) {
  if (sig == SIGTERM || sig == SIGINT) g_terminating = 1;
  if (g_by_pid) {
    for (int i = 0; i < 3; ++i) {
      if (kForwarded[i] == sig) g_pending[i] = 1;
    }
    return;
  }
  if (g_child_group > 0) kill(-g_child_group, sig);
}

// Sends the signals noted by Forward to the ranks of this host in the group directory.
void ForwardPending(const std::string& group_dir) {
  for (int i = 0; i < 3; ++i) {
    if (g_pending[i]) {
      g_pending[i] = 0;
      elastic::launch::SignalGroup(group_dir, kForwarded[i]);
    }
  }
}

// Waits for the ranks' launch by polling, forwarding the signals noted by Forward to the ranks by
// pid when group_dir is given. Where overdue() says so, the launch is stopped: its process group
// SIGTERM, SIGKILL 5 s later.
int WaitPolling(pid_t pid, const std::string& group_dir, const std::function<bool()>& overdue = {}) {
  int status = 0;
  std::chrono::steady_clock::time_point stopping{};
  for (;;) {
    if (!group_dir.empty()) ForwardPending(group_dir);
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r == -1 && errno != EINTR) return kExitLaunch;
    if (overdue && stopping == std::chrono::steady_clock::time_point{} && overdue()) {
      stopping = std::chrono::steady_clock::now();
      kill(-pid, SIGTERM);
    } else if (stopping != std::chrono::steady_clock::time_point{} &&
               std::chrono::steady_clock::now() - stopping > std::chrono::seconds(5)) {
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitLaunch;
}

// Starts argv with extra environment entries in its own process group; returns the pid or -1.
pid_t Start(const std::vector<std::string>& argv, const std::vector<std::string>& env, bool own_group,
            const std::string& stdout_to = "") {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (own_group) setpgid(0, 0);
  for (const std::string& e : env) {  // child only; "NAME" without a value: unset
    if (e.find('=') == std::string::npos) unsetenv(e.c_str());
    else putenv(const_cast<char*>(e.c_str()));
  }
  // Under srun, Open MPI takes a process that sees a step id for one that srun launched
  // directly and insists on Slurm's PMI: the ranks are the launcher's children, not srun's.
  unsetenv("SLURM_STEPID");
  unsetenv("SLURM_STEP_ID");
  if (!stdout_to.empty()) {
    const int fd = open(stdout_to.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) dup2(fd, STDOUT_FILENO);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::fprintf(stderr, "elastic-launch: cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

int WaitStatus(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) == -1) {
    if (errno != EINTR) return kExitLaunch;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitLaunch;
}

// Stops a helper (the leader of its own process group): SIGTERM, then SIGKILL to its whole
// group after 5 s (a DVM's agents, e.g. srun, with it).
void Stop(pid_t pid) {
  kill(pid, SIGTERM);
  for (int i = 0; i < 50; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// Stops the rendezvous server (if this launcher started one) and removes its files.
void StopServer(pid_t server, const std::vector<std::string>& command) {
  if (server <= 0) return;
  Stop(server);
  elastic::mpi::stack::RemoveLaunchFiles(command);
}

bool WaitForFile(const std::string& path, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && st.st_size > 0) {
      std::ifstream in(path);
      std::string line;
      if (std::getline(in, line) && !line.empty()) return true;  // a complete first line
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

bool MakePrivateDir(const std::string& path) {
  // mkdir -p with mode 700 for the last component.
  std::string partial;
  for (std::size_t pos = 0; pos != std::string::npos;) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (!partial.empty()) mkdir(partial.c_str(), 0700);
  }
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && chmod(path.c_str(), 0700) == 0;
}

// This executable's path, for the rank shim that mpirun starts.
std::string SelfPath(const char* argv0) {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) return std::string(buf, static_cast<std::size_t>(n));
  return argv0;
}

// Where the job's checkpoint is (the runtime's default: <run dir>/checkpoint/checkpoint.bin).
std::string CheckpointPath(const Options& o, const elastic::mpi::Config& config) {
  const std::string dir = config.Get("checkpoint_dir").empty() ? o.run_dir + "/checkpoint" : config.Get("checkpoint_dir");
  return dir + "/checkpoint.bin";
}

// The job: the elastic job's id (the parent's, also in extensions), else the Slurm job's, else "".
std::string JobId(const elastic::mpi::Config& config) {
  if (config.IsSet("job_id")) return config.Get("job_id");
  return config.Get("slurm_job_id");
}

bool Parse(int argc, char** argv, const elastic::mpi::Config& config, Options* o) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") {
      Usage(stdout);
      std::exit(0);
    }
    if (a == "--join") o->join = true;
    else if (a == "--hold") o->hold = true;
    else if (a == "--topology") o->topology = true;
    else if (a == "--oversubscribe") o->oversubscribe = true;
    else if ((a == "-n" || a == "--ranks") && (v = value())) o->ranks = std::atoi(v);
    else if (a == "--uri" && (v = value())) o->uri_file = v;
    else if (a == "--rank-agent" && (v = value())) {
      o->rank_agent.clear();
      std::istringstream words(v);
      for (std::string w; words >> w;) o->rank_agent.push_back(w);
    }
    else if (a == "--run-dir" && (v = value())) o->run_dir = v;
    else if (a == "--mpirun" && (v = value())) o->mpirun = v;
    else if ((a == "--rendezvous-server" || a == "--ompi-server") && (v = value())) o->server = v;
    else if (a == "--wait" && (v = value())) o->wait_s = std::atof(v);
    else if (a == "--export" && (v = value())) {
      std::string list = v;
      for (std::size_t p = 0; p <= list.size();) {
        std::size_t comma = list.find(',', p);
        std::string name = list.substr(p, comma == std::string::npos ? std::string::npos : comma - p);
        if (!name.empty()) o->exports.push_back(name);
        if (comma == std::string::npos) break;
        p = comma + 1;
      }
    }
    else {
      std::fprintf(stderr, "elastic-launch: bad option %s\n", a.c_str());
      return false;
    }
  }
  for (; i < argc; ++i) o->program.emplace_back(argv[i]);
  if (o->ranks == 0) {
    const long gpus = std::atol(config.Get("gpus_on_node").c_str());
    o->ranks = gpus > 0 ? static_cast<int>(gpus) : 1;
  }
  if ((o->program.empty() && !o->topology) || o->ranks < 1) return false;
  if (o->hold && !o->join) {
    std::fprintf(stderr, "elastic-launch: --hold is for an extension job's launcher (with --join)\n");
    return false;
  }
  if (!o->rank_agent.empty() && !o->join) {
    std::fprintf(stderr, "elastic-launch: --rank-agent is for an extension job's launcher (with --join)\n");
    return false;
  }
  // Run dir: --run-dir, ELASTIC_RUN_DIR, else <working directory>/.elastic/<job> (<job>: JobId,
  // "standalone" outside a job). The working directory (sbatch --chdir) is the user's and exists
  // on every node; the submit directory need not be writable. Extension jobs run in the parent's
  // working directory: the same run dir.
  if (o->run_dir.empty()) o->run_dir = config.Get("run_dir");
  if (o->run_dir.empty()) {
    char cwd[4096];
    const std::string base = getcwd(cwd, sizeof cwd) ? cwd : ".";
    const std::string job = JobId(config);
    o->run_dir = base + "/.elastic/" + (job.empty() ? "standalone" : job);
  }
  if (o->uri_file.empty()) o->uri_file = config.Get("rendezvous_uri");
  if (o->uri_file.rfind("file:", 0) == 0) o->uri_file = o->uri_file.substr(5);
  return true;
}

// An extension job whose group joins by relaunch (elasticd's `--join --hold`): it tells elasticd
// the node is ready (elasticd then relaunches the job's world over it, its ranks there started
// inside this job through `srun --overlap`) and holds the node, starting nothing, until SIGTERM
// (elasticd cancels the job once the world left the node). Exit 0 then; 69 when elasticd cannot
// be told.
int HoldNode(const elastic::mpi::Config& config) {
  auto link = elastic::mpi::ControllerLink::Create(config.Get("controller"), config.Get("job_id"),
                                                   config.Get("munge_socket"));
  if (!link.ok()) {
    std::fprintf(stderr, "elastic-launch: --hold: %s\n", link.status().message().c_str());
    return kExitRendezvous;
  }
  sigset_t wait_for;
  sigemptyset(&wait_for);
  sigaddset(&wait_for, SIGTERM);
  sigaddset(&wait_for, SIGINT);
  sigprocmask(SIG_BLOCK, &wait_for, nullptr);  // before the ready: a SIGTERM right after it waits for sigwait
  const std::string group = config.Get("group_id");
  auto r = link.value()->Call({{"type", "ready"}, {"group", std::atoi(group.c_str())}}, std::chrono::milliseconds(5000));
  if (!r.ok()) {
    std::fprintf(stderr, "elastic-launch: --hold: elasticd did not take group %s's ready: %s\n", group.c_str(),
                 r.status().message().c_str());
    return kExitRendezvous;
  }
  std::fprintf(stderr, "elastic-launch: holding this node for group %s of job %s: the job's world is started "
               "again over it\n", group.c_str(), config.Get("job_id").c_str());
  int sig = 0;
  sigwait(&wait_for, &sig);
  std::fprintf(stderr, "elastic-launch: group %s lets the node go (%s)\n", group.c_str(), strsignal(sig));
  return 0;
}

// The leader of an elastic parent tells elasticd how to start an extension of this job.
void RegisterLauncher(const Options& o, const elastic::mpi::Config& config, const std::string& uri) {
  auto link = elastic::mpi::ControllerLink::Create(config.Get("controller"), config.Get("job_id"),
                                                   config.Get("munge_socket"));
  if (!link.ok()) {
    std::fprintf(stderr, "elastic-launch: warning: %s; the job runs rigid\n", link.status().message().c_str());
    return;
  }
  char cwd[4096];
  nlohmann::json topology = nlohmann::json::object();
  if (auto t = elastic::mpi::DescribeTopology(); t.ok()) topology = nlohmann::json::parse(t.value().ToJson(), nullptr, false);
  nlohmann::json argv = nlohmann::json::array();
  for (const auto& a : o.program) argv.push_back(a);
  // Options an extension's launcher needs too (elasticd runs `elastic-launch --join ARGS -- argv`).
  nlohmann::json launcher_args = nlohmann::json::array();
  if (o.oversubscribe) launcher_args.push_back("--oversubscribe");
  for (const auto& x : o.exports) launcher_args.push_back("--export"), launcher_args.push_back(x);
  auto env = elastic::launch::ExtensionEnvironment(environ, o.exports);
  if (!env.left_out.empty()) {
    std::string names;
    for (const auto& n : env.left_out) names += (names.empty() ? "" : ", ") + n;
    std::fprintf(stderr, "elastic-launch: warning: the job's environment is larger than %zu KiB: extension jobs will "
                 "not get its largest variables (%s); unset them in the job script if the ranks need none of them\n",
                 elastic::launch::kMaxExtensionEnvBytes / 1024, names.c_str());
  }
  nlohmann::json msg{{"type", "launcher"},
                     {"rendezvous_uri", uri},
                     {"argv", argv},
                     {"launcher_args", launcher_args},
                     {"cwd", getcwd(cwd, sizeof cwd) ? cwd : "/"},
                     {"env", env.vars},
                     {"topology", topology.is_discarded() ? nlohmann::json::object() : topology},
                     {"grows_onto", elastic::mpi::stack::GrowsOnto()},
                     // An extension's ranks started outside its launcher (the DVM's) need elasticd's
                     // --rank-agent to run inside the extension job.
                     {"rank_agent", elastic::mpi::stack::RanksOutsideLauncher()},
                     {"ranks", o.ranks}};  // this node's ranks: a relaunch's world has them on it
  auto r = link.value()->Call(msg, std::chrono::milliseconds(5000));
  if (!r.ok()) {
    std::fprintf(stderr, "elastic-launch: warning: elasticd did not take the launcher registration (%s); the job "
                 "will not grow\n", r.status().message().c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], elastic::launch::kRankShimOption) == 0) {
    return elastic::launch::RankShimMain(argc, argv);
  }
  if (argc > 1 && std::strcmp(argv[1], elastic::launch::kAgentOption) == 0) {
    return elastic::launch::AgentMain(argc, argv);
  }
  using elastic::launch::ReadFirstLine;
  using elastic::launch::WritePrivateFile;
  {
    // Slurm's time-limit warning (--signal=USR1@S) can come while the rendezvous starts, before
    // there are ranks to checkpoint: then it is dropped, not fatal (its default action). Later
    // it reaches the ranks (Forward), which checkpoint.
    struct sigaction early {};
    early.sa_handler = Forward;
    sigemptyset(&early.sa_mask);
    sigaction(SIGUSR1, &early, nullptr);
  }
  // Set by this launcher alone, for a world it launches over several nodes (not inherited).
  unsetenv(elastic::contract::kSpannedNodes);
  const elastic::mpi::Config config = elastic::mpi::Config::FromEnvironment();
  Options o;
  if (!Parse(argc, argv, config, &o)) {
    Usage();
    return kExitUsage;
  }
  if (o.topology) {  // the summary the launcher reports to elasticd (`launcher` message)
    auto topo = elastic::mpi::DescribeTopology();
    if (!topo.ok()) {
      std::fprintf(stderr, "elastic-launch: %s\n", topo.status().ToString().c_str());
      return kExitLaunch;
    }
    std::printf("%s\n", topo.value().ToJson().c_str());
    return 0;
  }
  if (o.hold) return HoldNode(config);
  // This node's group and the number of node groups: ELASTIC_NODE_GROUP(S), else the srun step's
  // node index and node count (one launcher per node), else a single node.
  std::string node_group = config.IsSet("node_group") ? config.Get("node_group") : config.Get("slurm_node_id");
  if (node_group.empty()) node_group = "0";
  std::string node_groups = config.IsSet("node_groups") ? config.Get("node_groups") : config.Get("slurm_step_nodes");
  if (node_groups.empty() || o.join) node_groups = "1";
  const bool leader = !o.join && node_group == "0";
  const bool several = std::atoi(node_groups.c_str()) > 1;
  // One launch over all the step's nodes by node group 0's launcher (spanning_world.h), once the
  // node records show one node group per node.
  const bool may_span = several && !o.join && elastic::mpi::stack::LaunchesAcrossNodes();
  bool spanning = false;
  // The job's initial token authenticates its own node groups (interfaces.md section 6). A job
  // without one (rigid: no elasticd) gets one from the leader through the private run dir.
  std::string token = config.Get("join_token");
  const bool own_token = several && token.empty();
  pid_t server = -1;
  std::vector<std::string> server_cmd;  // the rendezvous server's command (leader only)

  if (o.join) {
    if (o.uri_file.empty()) {
      std::fprintf(stderr, "elastic-launch: --join needs --uri or ELASTIC_RENDEZVOUS_URI\n");
      return kExitUsage;
    }
    struct stat st {};
    if (o.uri_file.front() != '/' || stat(o.uri_file.c_str(), &st) != 0) {
      // elasticd hands over the URI itself (an extension job): keep it in a private file.
      if (!MakePrivateDir(o.run_dir)) {
        std::fprintf(stderr, "elastic-launch: cannot create run directory %s: %s\n", o.run_dir.c_str(),
                     std::strerror(errno));
        return kExitRendezvous;
      }
      const std::string file = o.run_dir + "/rendezvous-group" + config.Get("group_id") + ".uri";
      std::ofstream out(file, std::ios::trunc);
      out << o.uri_file << "\n";
      if (!out.good()) {
        std::fprintf(stderr, "elastic-launch: cannot write %s\n", file.c_str());
        return kExitRendezvous;
      }
      o.uri_file = file;
    }
  } else {
    if (!MakePrivateDir(o.run_dir)) {
      std::fprintf(stderr, "elastic-launch: cannot create run directory %s: %s\n", o.run_dir.c_str(),
                   std::strerror(errno));
      return kExitRendezvous;
    }
    if (o.uri_file.empty()) o.uri_file = o.run_dir + "/rendezvous.uri";
    if (leader) {
      unlink(o.uri_file.c_str());
      unlink((o.run_dir + "/world.end").c_str());
      // A world launched over all the nodes by an earlier run of the job (requeued) may have left
      // its ranks' pid files behind: never signal what those pids are now.
      elastic::launch::RemoveGroupDir(elastic::launch::SpanningGroupDir(o.run_dir));
      // A relaunch record of an earlier run of the job is not this world's; its state may be the
      // job's newest (relauncher.h).
      elastic::launch::KeepLeftoverRecord(o.run_dir, CheckpointPath(o, config));
      if (own_token) {
        auto made = elastic::contract::NewJoinToken();
        token = made.ok() ? made.value() : "";
        if (token.empty() || !WritePrivateFile(o.run_dir + "/initial.token", token + "\n")) {
          std::fprintf(stderr, "elastic-launch: cannot write %s/initial.token\n", o.run_dir.c_str());
          return kExitRendezvous;
        }
      }
      server_cmd = elastic::mpi::stack::ServerCommand(o.server, o.uri_file, config.Get("rendezvous_if"));
      server = Start(server_cmd, {}, /*own_group=*/true, "/dev/null");
      if (server < 0) {
        std::fprintf(stderr, "elastic-launch: cannot start %s\n", o.server.c_str());
        return kExitRendezvous;
      }
    }
  }
  if (!WaitForFile(o.uri_file, o.wait_s)) {
    std::fprintf(stderr, "elastic-launch: no rendezvous URI in %s after %g s\n", o.uri_file.c_str(), o.wait_s);
    StopServer(server, server_cmd);
    return kExitRendezvous;
  }

  if (own_token && !leader) {
    token = ReadFirstLine(o.run_dir + "/initial.token");
    if (token.empty()) {
      std::fprintf(stderr, "elastic-launch: no initial token in %s/initial.token\n", o.run_dir.c_str());
      return kExitRendezvous;
    }
  }

  // elasticd learns the rendezvous extensions join through; again whenever a relaunch restarts it.
  const bool registers = leader && config.Get("mode") == "elastic" && config.Get("role") == "parent" &&
                         !config.Get("controller").empty() && config.Get("standalone") != "1";
  std::string registered_uri;
  if (registers) {
    registered_uri = ReadFirstLine(o.uri_file);
    RegisterLauncher(o, config, registered_uri);
  }

  // torchrun's world at start (torch_env.h): every node group's rank count and node group 0's
  // MASTER_ADDR and MASTER_PORT, through the run dir. A joining group is not part of that world.
  namespace launch = elastic::launch;
  std::optional<launch::TorchWorld> torch_world;
  const std::string launch_uri = ReadFirstLine(o.uri_file);
  std::vector<launch::NodeRecord> nodes;  // every node's record (spanning: the world's hosts)
  if (!o.join) {
    launch::NodeRecord mine{launch_uri, o.ranks, "", 0, elastic::mpi::ThisNodeName()};
    elastic::Status chosen = leader ? launch::ChooseMaster(config.Get("rendezvous_if"), !several, &mine)
                                    : elastic::Status::Ok();
    auto world = !chosen.ok() ? elastic::Result<launch::TorchWorld>(chosen)
                 : several    ? launch::ExchangeRecords(o.run_dir, mine, std::atoi(node_group.c_str()),
                                                        std::atoi(node_groups.c_str()), o.wait_s, &nodes)
                              : launch::WorldFromRecords({mine}, std::atoi(node_group.c_str()));
    if (!world.ok()) {
      std::fprintf(stderr, "elastic-launch: torchrun's environment: %s\n", world.status().message().c_str());
      // The other launchers may have all the records and wait for a world this one never starts.
      if (leader && may_span) launch::WriteWorldEnd(o.run_dir, launch_uri, kExitRendezvous);
      StopServer(server, server_cmd);
      return kExitRendezvous;
    }
    torch_world = world.value();
    spanning = may_span && launch::OneGroupPerNode(nodes);
  }

  // The ranks: environment of docs/interfaces.md section 2 ("set by elastic-launch").
  namespace contract = elastic::contract;
  auto var = [](const char* name, const std::string& value) { return std::string(name) + "=" + value; };
  // relaunched: the record of the world this one replaces (relaunch.h), whose ranks here number
  // `here`; torchrun's variables then describe this node only.
  auto ranks_env = [&](int here, const std::string& relaunched) {
    std::vector<std::string> env = {
        var(contract::kLocalSize, std::to_string(here)),
        var(contract::kNodeGroup, relaunched.empty() && !spanning ? node_group : "0"),
        var(contract::kNodeGroups, relaunched.empty() && !spanning ? node_groups : "1"),
        var(contract::kRendezvousUri, o.uri_file),
        var(contract::kRunDir, o.run_dir),
    };
    if (o.join) env.push_back(var(contract::kJoin, "1"));
    if (own_token) env.push_back(var(contract::kJoinToken, token));
    if (!relaunched.empty()) env.push_back(var(contract::kRelaunchFrom, relaunched));
    if (spanning && relaunched.empty()) env.push_back(var(contract::kSpannedNodes, std::to_string(nodes.size())));
    // Oversubscribed cores (tests on small machines): ranks must yield while they wait, or the
    // busy-polling ones starve the others (a merged world's allreduce was 40x slower).
    if (o.oversubscribe) env.push_back("OMPI_MCA_mpi_yield_when_idle=1");
    const std::string job = JobId(config);
    const bool torch = torch_world && relaunched.empty();
    for (std::string& e : launch::TorchEnvironment(torch ? &*torch_world : nullptr, here, job.empty() ? "none" : job,
                                                   here == 1 ? 0 : -1)) {
      env.push_back(std::move(e));
    }
    return env;
  };
  // Each rank's RANK and LOCAL_RANK: this launcher in front of the program (torch_env.h); with
  // the group directory where the ranks are not this launcher's children (group_dir.h).
  const bool by_pid = elastic::mpi::stack::RanksOutsideLauncher();
  const std::string group_dir = spanning ? launch::SpanningGroupDir(o.run_dir)
                                : by_pid ? o.run_dir + "/group." + std::to_string(getpid())
                                         : "";
  elastic::mpi::stack::GroupLaunch group;
  group.mpirun = o.mpirun;
  group.ranks = o.ranks;
  group.oversubscribe = o.oversubscribe;
  group.uri_file = o.uri_file;
  group.rank_shim = {SelfPath(argv[0]), launch::kRankShimOption,
                     torch_world ? std::to_string(torch_world->rank_offset) : "-"};
  if (by_pid) group.rank_shim.push_back(group_dir);
  group.rank_shim.push_back("--");
  group.program = o.program;
  if (o.join && !o.hold) group.rank_agent = o.rank_agent;
  if (spanning) {  // every node's ranks, each node's first rank for the shim
    group.ranks = torch_world->world_size;
    group.hosts = launch::SpanningHosts(nodes);
    group.rank_shim[2] = launch::NodeStarts(nodes);
    if (leader) std::fprintf(stderr, "elastic-launch: one world of %d ranks over %s\n", group.ranks, group.hosts.c_str());
  }
  g_by_pid = by_pid || spanning ? 1 : 0;
  struct sigaction sa {};
  sa.sa_handler = Forward;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  // One world's ranks on this launcher's behalf: started, waited for, their files removed.
  auto run_group = [&](std::vector<std::string> env, const std::function<bool()>& overdue = {}) {
    const std::vector<std::string> cmd = elastic::mpi::stack::GroupCommand(group, &env);
    if (by_pid && (!MakePrivateDir(o.run_dir) || !elastic::launch::WriteGroupDir(group_dir, env))) {
      std::fprintf(stderr, "elastic-launch: cannot write the group's directory %s: %s\n", group_dir.c_str(),
                   std::strerror(errno));
      elastic::mpi::stack::RemoveLaunchFiles(cmd);
      return static_cast<int>(kExitLaunch);
    }
    const pid_t ranks = Start(cmd, env, /*own_group=*/true);
    if (ranks < 0) {
      if (by_pid) elastic::launch::RemoveGroupDir(group_dir);
      elastic::mpi::stack::RemoveLaunchFiles(cmd);
      return static_cast<int>(kExitLaunch);
    }
    g_child_group = ranks;
    const int status = by_pid || overdue ? WaitPolling(ranks, by_pid ? group_dir : "", overdue) : WaitStatus(ranks);
    g_child_group = 0;
    if (by_pid) elastic::launch::RemoveGroupDir(group_dir);
    elastic::mpi::stack::RemoveLaunchFiles(cmd);
    return status;
  };
  int rc = 0;
  if (spanning && !leader) {
    std::fprintf(stderr, "elastic-launch: node group %s: this node's %d ranks are in the world node group 0's "
                 "launcher starts over %zu nodes\n", node_group.c_str(), o.ranks, nodes.size());
    rc = launch::AwaitWorldEnd(o.run_dir, launch_uri, [&] { ForwardPending(group_dir); });
  } else {
    rc = run_group(ranks_env(o.ranks, ""));
  }
  bool spans_others = false;
  if (leader) {
    // The world ended for a relaunch (relaunch.h): start it again where the record says, as long
    // as the worlds end so.
    elastic::launch::ProcessHooks hooks{
        [](const std::vector<std::string>& cmd) { return Start(cmd, {}, /*own_group=*/true, "/dev/null"); },
        [](pid_t pid, const std::vector<std::string>& cmd) { StopServer(pid, cmd); }, WaitForFile};
    elastic::launch::Relauncher relauncher({o.run_dir, SelfPath(argv[0]), config.Get("rendezvous_if"), o.server,
                                            o.uri_file, o.wait_s},
                                           std::move(hooks), &server, &server_cmd);
    bool failed = false;
    while (!g_terminating && relauncher.Continues(rc)) {
      relauncher.ClearSignalled();
      auto world = relauncher.Next(&group);
      if (!world.ok()) {
        std::fprintf(stderr, "elastic-launch: relaunch: %s\n", world.status().message().c_str());
        if (!g_terminating && relauncher.FallBack(world.status().message())) continue;  // the world before it
        failed = true;
        break;
      }
      if (g_terminating) break;  // SIGTERM while the rendezvous restarted: no new world
      if (registers && ReadFirstLine(o.uri_file) != registered_uri) {
        registered_uri = ReadFirstLine(o.uri_file);
        RegisterLauncher(o, config, registered_uri);
      }
      group.rank_shim[2] = "-";  // no torchrun RANK: the world spans what the record says
      // A world that has not taken its state within --wait (a daemon's Slurm step that hangs) is
      // stopped; one that ended before it took it (a daemon on a new node that could not start)
      // is undone: the world before it again, which tells elasticd the relaunch failed.
      const auto started = std::chrono::steady_clock::now();
      bool overdue = false;
      rc = run_group(ranks_env(world.value(), relauncher.record()), [&] {
        overdue = std::chrono::steady_clock::now() - started > std::chrono::duration<double>(o.wait_s) &&
                  relauncher.StateUntaken();
        if (overdue) {
          std::fprintf(stderr, "elastic-launch: the relaunched world has not taken its state after %g s "
                       "(--wait): it is stopped\n", o.wait_s);
        }
        return overdue;
      });
      char why[96];
      if (overdue) std::snprintf(why, sizeof why, "it had not taken the state after %g s", o.wait_s);
      else std::snprintf(why, sizeof why, "it ended with status %d before it took the state", rc);
      if (rc != 0 && !g_terminating && relauncher.FallBack(why)) {
        continue;
      }
    }
    if (g_terminating && rc == 0) rc = 128 + SIGTERM;
    if (relauncher.Asked()) relauncher.Abandon();  // ending with a record no world took
    // A relaunch that did not complete: the world's newest state is the job's checkpoint now,
    // and the exit status elasticd restarts a job from its checkpoint for (interfaces.md section 7).
    if (relauncher.Finish(CheckpointPath(o, config)) && !g_terminating) rc = elastic::kExitWorldLost;
    else if (failed) rc = static_cast<int>(kExitLaunch);
    if (!g_terminating) rc = relauncher.AfterNodesTaken(rc);
    relauncher.ClearSignalled();
    spans_others = relauncher.spans_others();
    if (spanning && !launch::WriteWorldEnd(o.run_dir, launch_uri, rc)) {
      std::fprintf(stderr, "elastic-launch: cannot write %s/world.end: the other nodes' launchers wait for it\n",
                   o.run_dir.c_str());
    }
  }
  // Other groups may still be ending through this launcher's rendezvous (mpi_stack.h); a DVM
  // that spans other nodes after a relaunch, or a world launched over all the job's nodes, served
  // this launch alone, and its daemons' steps there (its children here) never leave by themselves:
  // waiting for them cost every such job 30 s at its end.
  if (server > 0 && !spans_others && !spanning) elastic::mpi::stack::AwaitServerIdle(server, 30);
  StopServer(server, server_cmd);
  return rc;
}
