// The liveness side channel (elastic_mpi/src/liveness.h) without MPI: a responder answers only a
// probe that sends its ask secret, and a probe counts a peer alive only when the answer carries
// the peer's answer secret and the rank it asked for.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "liveness.h"

namespace d = elastic::mpi::detail;

namespace {

// Connects to 127.0.0.1:port, sends `request`, returns what comes back before the close.
std::string Ask(std::uint16_t port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string got;
  char buf[256];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  close(fd);
  return got;
}

// A stand-in for a process that took a dead rank's port: answers every connection with
// `reply(request)`.
class Impostor {
 public:
  explicit Impostor(std::string (*reply)(const std::string&)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(fd_, 8);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, reply] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        const int c = accept(fd_, nullptr, nullptr);
        char buf[256];
        const ssize_t n = recv(c, buf, sizeof buf, 0);
        const std::string line = reply(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0));
        send(c, line.data(), line.size(), MSG_NOSIGNAL);
        close(c);
      }
    });
  }
  ~Impostor() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

TEST(Liveness, ResponderAnswersOnlyItsAskSecret) {
  d::LivenessResponder responder([] { return std::string("rank 3 outside collectives (computing) at step 7"); });
  ASSERT_NE(responder.port(), 0);
  EXPECT_EQ(Ask(responder.port(), "anything 3\n"), "");  // before any exchange: no one
  const d::PeerAddress mine = responder.Renew();
  EXPECT_EQ(std::string(mine.ask).size(), 32u);
  EXPECT_NE(std::string(mine.ask), std::string(mine.answer));
  EXPECT_EQ(Ask(responder.port(), "0123456789abcdef0123456789abcdef 3\n"), "");
  EXPECT_EQ(Ask(responder.port(), std::string(mine.answer) + " 3\n"), "");
  EXPECT_EQ(Ask(responder.port(), std::string(mine.ask) + " 3\n"),
            std::string(mine.answer) + " rank 3 outside collectives (computing) at step 7\n");
  // A new world: the old secrets open nothing.
  const d::PeerAddress renewed = responder.Renew();
  EXPECT_EQ(Ask(responder.port(), std::string(mine.ask) + " 3\n"), "");
  EXPECT_NE(Ask(responder.port(), std::string(renewed.ask) + " 3\n"), "");
}

TEST(Liveness, ProbeCountsOnlyTheRankItAskedFor) {
  d::LivenessResponder responder([] { return std::string("rank 3 busy in allreduce at step 7"); });
  d::PeerAddress peer = responder.Renew();
  const d::ProbeResult ok = d::ProbePeer(peer, 3, 5.0);
  EXPECT_TRUE(ok.alive) << ok.answer;
  EXPECT_EQ(ok.answer, "rank 3 busy in allreduce at step 7");  // the secret is not shown
  const d::ProbeResult other_rank = d::ProbePeer(peer, 2, 5.0);
  EXPECT_FALSE(other_rank.alive) << other_rank.answer;
  d::PeerAddress stale = peer;
  stale.answer[0] = stale.answer[0] == 'a' ? 'b' : 'a';
  EXPECT_FALSE(d::ProbePeer(stale, 3, 5.0).alive);
  d::PeerAddress wrong_ask = peer;
  wrong_ask.ask[0] = wrong_ask.ask[0] == 'a' ? 'b' : 'a';
  const d::ProbeResult refused = d::ProbePeer(wrong_ask, 3, 5.0);
  EXPECT_FALSE(refused.alive) << refused.answer;
}

TEST(Liveness, AnImpostorOnTheFreedPortIsNotAlive) {
  // Echoes the probe, ask secret and rank included, as a status line.
  Impostor echo([](const std::string& request) {
    return request.substr(0, request.find(' ')) + " rank 3 busy in allreduce at step 7\n";
  });
  Impostor plain([](const std::string&) { return std::string("rank 3 busy in allreduce at step 7\n"); });
  d::LivenessResponder responder([] { return std::string("rank 3 busy in allreduce at step 7"); });
  d::PeerAddress peer = responder.Renew();
  peer.port = echo.port();
  const d::ProbeResult echoed = d::ProbePeer(peer, 3, 5.0);
  EXPECT_FALSE(echoed.alive) << echoed.answer;
  peer.port = plain.port();
  const d::ProbeResult unsigned_answer = d::ProbePeer(peer, 3, 5.0);
  EXPECT_FALSE(unsigned_answer.alive) << unsigned_answer.answer;
}
