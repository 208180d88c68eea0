// The liveness side channel: a responder thread per rank, the probe, the address exchange.
#include "liveness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "check.h"

namespace elastic::mpi::detail {

namespace {

std::string OwnHost() {
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

// The request a probe sends: "<ask secret> <rank>\n" (the rank is for the reader of a capture;
// the secret alone names the rank). Read with a short deadline: the responder serves probes one
// at a time, and a stranger that connects and says nothing must not hold it up.
std::string ReadRequest(int fd) {
  std::string request;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  char buf[128];
  while (request.size() < 128 && request.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return {};
    pollfd p{fd, POLLIN, 0};
    const int rc = poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return {};
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {};
    request.append(buf, static_cast<std::size_t>(n));
  }
  return request.substr(0, request.find('\n'));
}

}  // namespace

std::string NewNonce() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : bytes) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

PeerAddress OwnAddress() {
  PeerAddress mine;
  const std::string host = OwnHost();
  std::memcpy(mine.host, host.data(), std::min(host.size(), sizeof mine.host - 1));
  return mine;
}

LivenessResponder::LivenessResponder(std::function<std::string()> status) : status_(std::move(status)) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof addr;
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd_, 64) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd_);
    fd_ = -1;
    return;
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] {
    while (!stop_.load(std::memory_order_relaxed)) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      const std::string request = ReadRequest(c);
      std::string ask;
      std::string answer;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ask = ask_;
        answer = answer_;
      }
      // Anyone but a prober of this world: closed without a word.
      if (!ask.empty() && request.substr(0, request.find(' ')) == ask) {
        const std::string line = answer + " " + status_() + "\n";
        [[maybe_unused]] const ssize_t n = send(c, line.data(), line.size(), MSG_NOSIGNAL);
      }
      close(c);
    }
  });
}

PeerAddress LivenessResponder::Renew() {
  PeerAddress mine = OwnAddress();
  mine.port = port_;
  if (port_ == 0) return mine;
  const std::string ask = NewNonce();
  const std::string answer = NewNonce();
  std::memcpy(mine.ask, ask.data(), std::min(ask.size(), sizeof mine.ask - 1));
  std::memcpy(mine.answer, answer.data(), std::min(answer.size(), sizeof mine.answer - 1));
  std::lock_guard<std::mutex> lock(mu_);
  ask_ = ask;
  answer_ = answer;
  return mine;
}

LivenessResponder::~LivenessResponder() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) close(fd_);
}

ProbeResult ProbePeer(const PeerAddress& peer, int rank, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  auto left_ms = [&] {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(ms > 0 ? ms : 0);
  };
  if (peer.port == 0) return {true, "no responder (liveness unknown; counted alive)"};
  const std::string host(peer.host, strnlen(peer.host, sizeof peer.host));
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  // A peer on this host: loopback (the host name need not resolve inside a container).
  const std::string target = host == OwnHost() ? "127.0.0.1" : host;
  if (getaddrinfo(target.c_str(), std::to_string(peer.port).c_str(), &hints, &found) != 0 || found == nullptr) {
    return {true, "host " + host + " does not resolve (liveness unknown; counted alive)"};
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    freeaddrinfo(found);
    return {true, "no socket (liveness unknown; counted alive)"};
  }
  int rc = connect(fd, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (rc != 0 && errno != EINPROGRESS) {
    const std::string why = std::strerror(errno);
    close(fd);
    return {false, "connect to " + host + ":" + std::to_string(peer.port) + ": " + why};
  }
  const std::string secret(peer.answer, strnlen(peer.answer, sizeof peer.answer));
  // Sent once the connection is made (POLLOUT).
  const std::string request = std::string(peer.ask, strnlen(peer.ask, sizeof peer.ask)) + " " +
                              std::to_string(rank) + "\n";
  bool sent = false;
  std::string answer;
  char buf[256];
  for (;;) {
    pollfd p{fd, static_cast<short>(sent ? POLLIN : POLLOUT), 0};
    rc = poll(&p, 1, left_ms());
    if (rc == 0) {
      close(fd);
      return {false, "no answer from " + host + ":" + std::to_string(peer.port) + " within " +
                         std::to_string(timeout_s) + " s"};
    }
    if (rc < 0 && errno == EINTR) continue;
    if (!sent && rc > 0 && (p.revents & POLLOUT) != 0) {
      // The whole request fits any socket buffer: one send, or the connect failed.
      sent = send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size());
      if (sent) continue;
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      answer.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    const int err = n < 0 ? errno : 0;
    close(fd);
    if (answer.empty()) {
      return {false, "connect to " + host + ":" + std::to_string(peer.port) + ": " +
                         (err != 0 ? std::strerror(err) : "closed without an answer")};
    }
    if (answer.back() == '\n') answer.pop_back();
    // Only the rank we asked, of this world, counts: anything else is not that rank.
    const std::string expected = secret + " rank " + std::to_string(rank) + " ";
    if (secret.empty() || answer.compare(0, expected.size(), expected) != 0) {
      return {false, host + ":" + std::to_string(peer.port) + " answered, but not as rank " + std::to_string(rank) +
                         " of this world (another process has its port)"};
    }
    return {true, answer.substr(secret.size() + 1)};
  }
}

Status ExchangeAddresses(MPI_Comm world, const PeerAddress& mine, std::vector<PeerAddress>* out) {
  int size = 0;
  ELASTIC_MPI_CHECK(MPI_Comm_size(world, &size));
  out->assign(static_cast<std::size_t>(size), PeerAddress{});
  ELASTIC_MPI_CHECK(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, out->data(), sizeof mine, MPI_BYTE, world));
  return Status::Ok();
}

}  // namespace elastic::mpi::detail
