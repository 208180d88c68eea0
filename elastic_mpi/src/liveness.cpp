// The liveness side channel: a responder thread per rank, the probe, the address exchange.
#include "liveness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
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

}  // namespace

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
      const std::string line = status_() + "\n";
      [[maybe_unused]] const ssize_t n = send(c, line.data(), line.size(), MSG_NOSIGNAL);
      close(c);
    }
  });
}

LivenessResponder::~LivenessResponder() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) close(fd_);
}

ProbeResult ProbePeer(const PeerAddress& peer, double timeout_s) {
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
  std::string answer;
  char buf[256];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    rc = poll(&p, 1, left_ms());
    if (rc == 0) {
      close(fd);
      return {false, "no answer from " + host + ":" + std::to_string(peer.port) + " within " +
                         std::to_string(timeout_s) + " s"};
    }
    if (rc < 0 && errno == EINTR) continue;
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
    return {true, answer};
  }
}

Status ExchangeAddresses(MPI_Comm world, std::uint16_t port, std::vector<PeerAddress>* out) {
  PeerAddress mine;
  const std::string host = OwnHost();
  std::memcpy(mine.host, host.data(), std::min(host.size(), sizeof mine.host - 1));
  mine.port = port;
  int size = 0;
  ELASTIC_MPI_CHECK(MPI_Comm_size(world, &size));
  out->assign(static_cast<std::size_t>(size), PeerAddress{});
  ELASTIC_MPI_CHECK(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, out->data(), sizeof mine, MPI_BYTE, world));
  return Status::Ok();
}

}  // namespace elastic::mpi::detail
