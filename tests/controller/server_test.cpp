// elasticd's runtime channel under pressure (controller/src/server.h): a real Server on an
// io_context in a thread, a private munged started for each test (munge's own daemon, as the
// current user, in a temporary directory), and clients of common/wire. Covers the budget of
// unauthenticated bytes, the frame timeout, the connection caps (per uid, per address before
// authentication, in all) with their throttled log lines, and accept's back-off while the
// process has no descriptors left, which must cost almost no CPU and end by itself.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "elastic/common/log.h"
#include "elastic/common/wire.h"
#include "server.h"

extern char** environ;

namespace elastic::controller {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// munged in the foreground, on a socket of its own; stopped (by its pid) when the test ends.
class MungeDaemon {
 public:
  MungeDaemon() {
    char tmpl[] = "/tmp/elastic-server-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);  // munged insists that everyone may reach its socket
    socket_ = dir_ + "/munge.socket";
    std::string key = dir_ + "/munge.key";
    {
      std::ofstream out(key, std::ios::binary);
      std::random_device rd;
      for (int i = 0; i < 1024; ++i) out.put(static_cast<char>(rd() & 0xff));
    }
    ::chmod(key.c_str(), 0400);
    std::string munged;
    for (const char* p : {"/usr/sbin/munged", "/usr/local/sbin/munged"}) {
      if (::access(p, X_OK) == 0) munged = p;
    }
    if (munged.empty()) throw std::runtime_error("munged not found: install munge (scripts/bootstrap installs it)");
    std::vector<std::string> args = {munged, "--foreground", "--force", "--socket=" + socket_, "--key-file=" + key,
                                     "--pid-file=" + dir_ + "/munged.pid", "--log-file=" + dir_ + "/munged.log",
                                     "--seed-file=" + dir_ + "/munged.seed"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // Its standard output and error go to a file beside its log.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    std::string out = dir_ + "/munged.out";
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    int e = ::posix_spawn(&pid_, munged.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (e != 0) throw std::runtime_error(std::string("cannot start munged: ") + std::strerror(e));
    wire::Munge probe(socket_);
    for (auto end = Clock::now() + 10s; Clock::now() < end; std::this_thread::sleep_for(20ms)) {
      if (probe.Encode("probe").ok()) return;
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("munged exited at once; its log: " + dir_ + "/munged.log");
      }
    }
    throw std::runtime_error("munged does not answer on " + socket_);
  }
  ~MungeDaemon() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& socket() const { return socket_; }

 private:
  std::string dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

// A Server on port 0 whose handler answers every request with the caller's uid.
class Harness {
 public:
  Harness(const std::string& munge_socket, ServerLimits limits) {
    server_ = std::make_unique<Server>(
        io_, munge_socket,
        [](uid_t uid, const nlohmann::json& msg) {
          return wire::MakeReply(msg.value("id", int64_t{0}), {{"uid", uid}});
        },
        std::move(limits));
    Status s = server_->Listen({"127.0.0.1", 0});
    if (!s.ok()) throw std::runtime_error(s.message());
    port_ = server_->port();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Harness() {
    io_.stop();
    thread_.join();
    server_.reset();
  }
  uint16_t port() const { return port_; }

  // Runs `f` on the server's thread and returns its result.
  template <typename F>
  auto OnServer(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return result.get();
  }
  Server::Stats stats() {
    return OnServer([this] { return server_->stats(); });
  }
  // Waits up to 5 s for the server's counts to satisfy `ok`.
  bool WaitFor(std::function<bool(const ConnectionLimits&)> ok) {
    for (auto end = Clock::now() + 5s; Clock::now() < end; std::this_thread::sleep_for(5ms)) {
      if (OnServer([&] { return ok(server_->limits()); })) return true;
    }
    return false;
  }

 private:
  boost::asio::io_context io_;
  std::unique_ptr<Server> server_;
  uint16_t port_ = 0;
  std::thread thread_;
};

// A plain TCP connection to the server, for frames the client library would not send.
int RawConnect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void SendHeader(int fd, uint32_t len, size_t body_bytes_now) {
  uint32_t be = htonl(len);
  std::string data(reinterpret_cast<const char*>(&be), 4);
  data.append(body_bytes_now, 'x');
  ASSERT_EQ(::send(fd, data.data(), data.size(), MSG_NOSIGNAL), static_cast<ssize_t>(data.size()));
}

// The next reply on a raw connection, its credential checked.
nlohmann::json ReadReply(int fd, const std::string& munge_socket) {
  auto frame = wire::ReadFrame(fd, Clock::now() + 5s);
  if (!frame.ok()) return {{"read_error", frame.status().message()}};
  wire::Munge munge(munge_socket);
  auto decoded = munge.Decode(frame.value());
  if (!decoded.ok()) return {{"read_error", decoded.status().message()}};
  return nlohmann::json::parse(decoded.value().payload);
}

// True when the peer closed the connection (EOF or reset) within `within`.
bool ClosedWithin(int fd, std::chrono::milliseconds within) {
  auto frame = wire::ReadFrame(fd, Clock::now() + within);
  return !frame.ok() && frame.status().kind() == ErrorKind::kUnavailable;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = std::make_shared<MemorySink>();
    Logger::Get().SetSinks({log_});
    Logger::Get().SetLevel(LogLevel::kInfo);
    munged_ = std::make_unique<MungeDaemon>();
  }
  void TearDown() override {
    for (int fd : fds_) ::close(fd);
    Logger::Get().SetSinks({std::make_shared<StderrSink>("server_test")});
  }

  std::unique_ptr<Harness> Start(ServerLimits limits) {
    return std::make_unique<Harness>(munged_->socket(), std::move(limits));
  }
  std::unique_ptr<wire::Client> Connect(uint16_t port) {
    wire::ClientOptions opts;
    opts.munge_socket = munged_->socket();
    opts.trusted_uids = {::geteuid()};
    auto c = wire::Client::Connect({"127.0.0.1", port}, opts);
    EXPECT_TRUE(c.ok()) << c.status().message();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  // One status request; the Status of its reply (or of the call).
  static Status Ask(wire::Client& c) {
    auto reply = c.Call({{"type", "status"}}, 5s);
    if (!reply.ok()) return reply.status();
    return wire::ReplyStatus(reply.value());
  }
  int Raw(uint16_t port) {
    int fd = RawConnect(port);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    fds_.push_back(fd);
    return fd;
  }
  void CloseRaw(int fd) {
    ::close(fd);
    fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
  }
  int LogLines(const std::string& containing) const {
    int n = 0;
    for (const auto& e : log_->entries()) n += e.message.find(containing) != std::string::npos;
    return n;
  }

  std::shared_ptr<MemorySink> log_;
  std::unique_ptr<MungeDaemon> munged_;
  std::vector<int> fds_;
};

TEST_F(ServerTest, AnswersAnAuthenticatedRequestWithTheCallersUid) {
  auto h = Start({});
  auto c = Connect(h->port());
  ASSERT_TRUE(c);
  auto reply = c->Call({{"type", "status"}}, 5s);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_TRUE(reply.value()["ok"].get<bool>());
  EXPECT_EQ(reply.value()["uid"].get<uid_t>(), ::geteuid());
}

TEST_F(ServerTest, RefusesAFrameThatWouldPassTheUnauthenticatedBudget) {
  ServerLimits limits;
  limits.max_unauthenticated_bytes = 100 * 1024;
  auto h = Start(limits);
  // A slow frame holds 80 KiB of the budget.
  int slow = Raw(h->port());
  SendHeader(slow, 80 * 1024, 10);
  ASSERT_TRUE(h->WaitFor([](const ConnectionLimits& l) { return l.unauthenticated_bytes() == 80 * 1024; }));
  // 30 KiB more do not fit: refused before anything is read or allocated, then closed.
  int over = Raw(h->port());
  SendHeader(over, 30 * 1024, 0);
  nlohmann::json reply = ReadReply(over, munged_->socket());
  ASSERT_FALSE(reply.contains("read_error")) << reply.dump();
  EXPECT_FALSE(reply["ok"].get<bool>());
  EXPECT_EQ(reply["error"]["kind"], "unavailable");
  EXPECT_EQ(reply["error"]["message"],
            "elasticd is reading 81920 bytes of requests not yet authenticated; a frame of 30720 more would pass the "
            "limit (controller.max_unauthenticated_mib, 102400 bytes); retry later");
  EXPECT_TRUE(ClosedWithin(over, 2s));
  EXPECT_TRUE(h->WaitFor([](const ConnectionLimits& l) { return l.unauthenticated_bytes() == 80 * 1024; }));
  // A small request still fits; once the slow frame is gone, all of the budget is free again.
  auto c = Connect(h->port());
  ASSERT_TRUE(c);
  EXPECT_TRUE(Ask(*c).ok());
  CloseRaw(slow);
  EXPECT_TRUE(h->WaitFor([](const ConnectionLimits& l) { return l.unauthenticated_bytes() == 0; }));
  EXPECT_EQ(h->stats().refused_connections, 1u);
  EXPECT_EQ(LogLines("refused the connection from 127.0.0.1:"), 1);
}

TEST_F(ServerTest, ClosesAConnectionWhoseFrameStallsButKeepsAnIdleOne) {
  ServerLimits limits;
  limits.frame_timeout = 300ms;
  auto h = Start(limits);
  auto idle = Connect(h->port());
  ASSERT_TRUE(idle);
  ASSERT_TRUE(Ask(*idle).ok());
  auto start = Clock::now();
  int first = Raw(h->port());  // a first frame that never completes
  SendHeader(first, 1000, 10);
  int silent = Raw(h->port());  // a connection that never sends anything
  EXPECT_TRUE(ClosedWithin(first, 3s));
  EXPECT_TRUE(ClosedWithin(silent, 3s));
  EXPECT_GE(Clock::now() - start, 250ms);
  EXPECT_EQ(h->stats().frame_timeouts, 2u);
  EXPECT_TRUE(h->WaitFor([](const ConnectionLimits& l) { return l.unauthenticated_bytes() == 0 && l.open() == 1; }));
  // Idle between frames is not a stalled frame: the authenticated connection still answers.
  EXPECT_TRUE(Ask(*idle).ok());
  EXPECT_EQ(LogLines("sent no complete message within 0.3 s (controller.frame_timeout)"), 1);
}

TEST_F(ServerTest, CapsTheConnectionsOfOneUid) {
  ServerLimits limits;
  limits.max_connections_per_user = 2;
  limits.unlimited_uid = std::nullopt;
  auto h = Start(limits);
  auto a = Connect(h->port());
  auto b = Connect(h->port());
  auto c = Connect(h->port());
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(Ask(*a).ok());
  ASSERT_TRUE(Ask(*b).ok());
  Status third = Ask(*c);
  EXPECT_EQ(third.kind(), ErrorKind::kUnavailable);
  EXPECT_EQ(third.message(), "uid " + std::to_string(::geteuid()) +
                                 " has 2 connections to elasticd open, the limit (controller.max_connections_per_user "
                                 "2); every running elastic job's runtime holds one: close others or ask the centre "
                                 "to raise it");
  EXPECT_FALSE(Ask(*c).ok());  // closed after the refusal
  c.reset();
  a.reset();
  uid_t me = ::geteuid();
  ASSERT_TRUE(h->WaitFor([me](const ConnectionLimits& l) { return l.of_user(me) == 1 && l.open() == 1; }));
  auto d = Connect(h->port());
  ASSERT_TRUE(d);
  EXPECT_TRUE(Ask(*d).ok());
  EXPECT_EQ(h->stats().refused_connections, 1u);
}

TEST_F(ServerTest, TheUnlimitedUidIsNotCappedPerUid) {
  ServerLimits limits;
  limits.max_connections_per_user = 1;
  limits.unlimited_uid = ::geteuid();
  auto h = Start(limits);
  std::vector<std::unique_ptr<wire::Client>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(Connect(h->port()));
    ASSERT_TRUE(clients.back());
    EXPECT_TRUE(Ask(*clients.back()).ok());
  }
}

TEST_F(ServerTest, CapsUnauthenticatedConnectionsPerAddressAndAllConnections) {
  ServerLimits limits;
  limits.max_connections = 3;
  limits.max_unauthenticated_per_address = 2;
  auto h = Start(limits);
  int r1 = Raw(h->port());
  Raw(h->port());
  ASSERT_TRUE(h->WaitFor([](const ConnectionLimits& l) { return l.unauthenticated_from("127.0.0.1") == 2; }));
  auto refused = Connect(h->port());
  ASSERT_TRUE(refused);
  Status s = Ask(*refused);
  EXPECT_EQ(s.kind(), ErrorKind::kUnavailable);
  EXPECT_EQ(s.message(),
            "127.0.0.1 has 2 connections to elasticd that have not sent a message yet, the limit "
            "(controller.max_unauthenticated_per_address 2); retry later");
  // Once authenticated, a connection no longer counts against its address.
  CloseRaw(r1);
  ASSERT_TRUE(h->WaitFor([](const ConnectionLimits& l) { return l.open() == 1; }));
  auto a = Connect(h->port());
  ASSERT_TRUE(a);
  EXPECT_TRUE(Ask(*a).ok());
  auto b = Connect(h->port());
  ASSERT_TRUE(b);
  EXPECT_TRUE(Ask(*b).ok());
  // Three open (one unauthenticated, two authenticated): a flood of further connections is
  // refused, each with the limit it hit, and logged once.
  for (int i = 0; i < 20; ++i) {
    auto c = Connect(h->port());
    ASSERT_TRUE(c);
    Status over = Ask(*c);
    ASSERT_EQ(over.message(), "elasticd has 3 connections open, its limit (controller.max_connections 3); retry later");
  }
  EXPECT_EQ(h->stats().refused_connections, 21u);
  EXPECT_EQ(LogLines("refused the connection from 127.0.0.1:"), 1);
  EXPECT_TRUE(Ask(*a).ok());
}

// CPU time of the whole process (the server's thread; the test's own thread sleeps).
std::chrono::nanoseconds ProcessCpu() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Leaves one descriptor, connects a raw client with it (the server cannot accept that
// connection; the server is to hold no connection it could close meanwhile), waits `hold`,
// gives the descriptors back and returns the client and the process's CPU time meanwhile.
struct Exhausted {
  int client = -1;
  std::chrono::nanoseconds cpu{};
};
Exhausted ExhaustDescriptors(uint16_t port, std::chrono::milliseconds hold) {
  Exhausted out;
  rlimit saved{};
  EXPECT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 256);
  EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
  EXPECT_EQ(errno, EMFILE);
  ::close(filler.back());
  filler.pop_back();
  out.client = RawConnect(port);
  EXPECT_GE(out.client, 0) << std::strerror(errno);
  auto cpu_before = ProcessCpu();
  std::this_thread::sleep_for(hold);
  out.cpu = ProcessCpu() - cpu_before;
  // One at a time: the server may accept with the first one given back and fail again at once.
  for (int fd : filler) ::close(fd);
  EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  return out;
}

// A status request on a raw connection, answered within `within`.
bool AnsweredWithin(int client, const std::string& munge_socket, std::chrono::milliseconds within) {
  auto start = Clock::now();
  wire::Munge munge(munge_socket);
  auto cred = munge.Encode(R"({"v":1,"type":"status","id":7})");
  EXPECT_TRUE(cred.ok()) << cred.status().message();
  if (!cred.ok() || !wire::WriteFrame(client, cred.value(), Clock::now() + 5s).ok()) return false;
  nlohmann::json reply = ReadReply(client, munge_socket);
  ::close(client);
  EXPECT_EQ(reply.value("ok", false), true) << reply.dump();
  return reply.value("ok", false) && Clock::now() - start < within;
}

TEST_F(ServerTest, BacksOffWhileNoDescriptorIsLeftAndServesWhenTheyComeBack) {
  auto h = Start({});
  // The one descriptor left goes to a client; the server cannot accept its connection.
  Exhausted e = ExhaustDescriptors(h->port(), 700ms);
  ASSERT_GE(e.client, 0);
  uint64_t failures = h->stats().accept_failures;
  // No spin: a handful of retries (after 0.1, 0.2, 0.4 s), not thousands, and almost no CPU
  // (about 0.2 ms measured; a spinning accept loop takes a core, over 200 ms here even on a
  // loaded machine).
  EXPECT_GE(failures, 2u);
  EXPECT_LE(failures, 7u);
  EXPECT_LT(e.cpu, 50ms) << "CPU time while no descriptor was left: "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(e.cpu).count() << " ms";
  // The waiting connection is accepted at the next retry (at most 1 s away) and answered.
  EXPECT_TRUE(AnsweredWithin(e.client, munged_->socket(), 2500ms));
  auto c = Connect(h->port());
  ASSERT_TRUE(c);
  EXPECT_TRUE(Ask(*c).ok());
  EXPECT_EQ(LogLines("cannot accept connections: Too many open files"), 1);
  EXPECT_EQ(LogLines("no file descriptors left: raise LimitNOFILE"), 1);
  EXPECT_EQ(LogLines("accepting connections again after"), 1);

  // Out of descriptors again within seconds, briefly: the same episode, no new line. (Each phase
  // starts a second or two after the last failure of the one before, well within the 10 s that
  // make an episode.)
  c.reset();
  ASSERT_TRUE(h->WaitFor([](const ConnectionLimits& l) { return l.open() == 0; }));
  e = ExhaustDescriptors(h->port(), 250ms);
  ASSERT_GE(e.client, 0);
  EXPECT_GT(h->stats().accept_failures, failures);
  EXPECT_TRUE(AnsweredWithin(e.client, munged_->socket(), 2500ms));
  EXPECT_EQ(LogLines("cannot accept connections"), 1);
  EXPECT_EQ(LogLines("accepting connections again after"), 1);

  // Again, for three seconds (the back-off reaches 1 s after 1.5 s): said once, and once when it
  // works again.
  ASSERT_TRUE(h->WaitFor([](const ConnectionLimits& l) { return l.open() == 0; }));
  e = ExhaustDescriptors(h->port(), 3000ms);
  ASSERT_GE(e.client, 0);
  EXPECT_TRUE(AnsweredWithin(e.client, munged_->socket(), 2500ms));
  EXPECT_EQ(LogLines("cannot accept connections: Too many open files"), 1);
  EXPECT_EQ(LogLines("cannot accept connections again: Too many open files"), 1);
  EXPECT_EQ(LogLines("accepting connections again after"), 2);
  c = Connect(h->port());
  ASSERT_TRUE(c);
  EXPECT_TRUE(Ask(*c).ok());
}

}  // namespace
}  // namespace elastic::controller
