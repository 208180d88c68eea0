#include "elastic/report/sacct.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "elastic/report/period.h"

namespace elastic::report {

const char* const kSacctFormat =
    "JobIDRaw,User,Account,Partition,AllocTRES,ElapsedRaw,Submit,Eligible,Start,End,State,AdminComment,JobID,JobName";

namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    size_t next = s.find(sep, pos);
    if (next == std::string_view::npos) {
      out.push_back(s.substr(pos));
      return out;
    }
    out.push_back(s.substr(pos, next - pos));
    pos = next + 1;
  }
}

bool ParseUnsigned(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

Result<int64_t> GpusOfTres(std::string_view tres) {
  if (tres.empty()) return int64_t{0};
  for (std::string_view item : Split(tres, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    if (item.substr(0, eq) != "gres/gpu") continue;
    uint64_t v = 0;
    std::string_view value = item.substr(eq + 1);
    if (!ParseUnsigned(value, &v)) {
      return Status(ErrorKind::kProtocol, "AllocTRES gres/gpu '" + std::string(value) + "' is not a count");
    }
    return static_cast<int64_t>(v);
  }
  return int64_t{0};
}

Result<std::vector<SacctRecord>> ParseSacct(std::string_view text) {
  std::vector<SacctRecord> out;
  size_t line_no = 0;
  for (std::string_view line : Split(text, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    std::string where = "sacct output line " + std::to_string(line_no);
    std::vector<std::string_view> f = Split(line, '|');
    if (f.size() < static_cast<size_t>(kSacctFields)) {
      return Status(ErrorKind::kProtocol, where + ": expected " + std::to_string(kSacctFields) +
                                              " fields separated by '|', got " + std::to_string(f.size()) + ": " +
                                              std::string(line));
    }
    SacctRecord r;
    r.job_id = std::string(f[0]);
    if (r.job_id.empty()) return Status(ErrorKind::kProtocol, where + ": empty JobIDRaw");
    where += " (job " + r.job_id + ")";
    if (!ParseUnsigned(f[0], &r.job_number)) r.job_number = 0;
    r.user = std::string(f[1]);
    r.account = std::string(f[2]);
    r.partition = std::string(f[3]);
    auto gpus = GpusOfTres(f[4]);
    if (!gpus.ok()) return Status(ErrorKind::kProtocol, where + ": " + gpus.status().message());
    r.gpus = gpus.value();
    uint64_t elapsed = 0;
    if (!ParseUnsigned(f[5], &elapsed)) {
      return Status(ErrorKind::kProtocol, where + ": ElapsedRaw '" + std::string(f[5]) + "' is not a number of seconds");
    }
    r.elapsed_s = static_cast<int64_t>(elapsed);
    static const char* kTimeNames[] = {"Submit", "Eligible", "Start", "End"};
    double* times[] = {&r.submit, &r.eligible, &r.start, &r.end};
    for (size_t i = 0; i < 4; ++i) {
      std::string_view t = f[6 + i];
      if (t == "Unknown" || t == "None" || t.empty()) continue;
      auto parsed = ParseTime(t, 0, kTimeNames[i]);
      if (!parsed.ok() || t.size() != 19) {
        return Status(ErrorKind::kProtocol, where + ": " + kTimeNames[i] + " '" + std::string(t) +
                                                "' is not a time of the form YYYY-MM-DDTHH:MM:SS");
      }
      *times[i] = parsed.value();
    }
    r.state = std::string(f[10]);
    r.admin_comment = std::string(f[11]);
    r.display_id = f[12].empty() ? r.job_id : std::string(f[12]);
    // JobName is last: a '|' in it must not shift the other fields.
    size_t name_at = 0;
    for (int i = 0; i < kSacctFields - 1; ++i) name_at += f[static_cast<size_t>(i)].size() + 1;
    r.name = std::string(line.substr(name_at));
    r.named_extension = contract::HasExtensionJobName(r.name);
    if (auto link = ParseExtensionComment(r.admin_comment)) {
      r.extension = true;
      r.parent = link->parent;
      r.group = link->group;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> SacctCommand(const std::string& sacct_path, double since, double until) {
  return {sacct_path,
          "--parsable2",
          "--noheader",
          "--allusers",
          "--duplicates",
          "--allocations",
          "--starttime=" + FormatTime(since),
          "--endtime=" + FormatTime(until),
          std::string("--format=") + kSacctFormat};
}

Result<std::string> RunSacct(const std::string& sacct_path, double since, double until) {
  std::vector<std::string> args = SacctCommand(sacct_path, since, until);
  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Status(ErrorKind::kInternal, std::string("pipe: ") + strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0 || pipe2(exec_pipe, O_CLOEXEC) != 0) {
    return Status(ErrorKind::kInternal, std::string("pipe: ") + strerror(errno));
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return Status(ErrorKind::kUnavailable, std::string("cannot fork for sacct: ") + strerror(errno));
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    setenv("SLURM_TIME_FORMAT", "standard", 1);
    execvp(argv[0], argv.data());
    int e = errno;
    ssize_t ignored = write(exec_pipe[1], &e, sizeof e);
    (void)ignored;
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(exec_pipe[1]);
  std::string out, err;
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&out, &err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    int n = poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        sinks[i]->append(buf, static_cast<size_t>(got));
      }
    }
  }
  int exec_errno = 0;
  ssize_t got = read(exec_pipe[0], &exec_errno, sizeof exec_errno);
  close(exec_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    return Status(ErrorKind::kUnavailable, "cannot run sacct '" + sacct_path + "': " + strerror(exec_errno));
  }
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string how = WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status))
                                        : "was killed by signal " + std::to_string(WTERMSIG(status));
    return Status(ErrorKind::kUnavailable, "sacct " + how + (err.empty() ? std::string() : ": " + err));
  }
  return out;
}

}  // namespace elastic::report
