// The liveness side channel (internal header): tells a rank that is late at a collective from
// one that is gone. MPI cannot say it (a collective with a dead peer often just waits), and a
// rank busy in a checkpoint write, an evaluation or a data-loader stall is late, not dead.
//
// Every rank answers on a small TCP socket of its own, from a thread of its own (so it answers
// while its main thread computes or sleeps): one line, "rank R step S busy in WHAT". The
// addresses are exchanged after every change of the world, each with two fresh random secrets
// of its rank: the prober sends the rank's `ask` secret and the rank it expects, and the
// responder answers only to its own `ask` (anyone else gets the connection closed without a
// word: a stranger reads nothing); the answer begins with the rank's `answer` secret, which the
// prober never sends, so a process that took a dead rank's freed port cannot pass for that rank
// even when it echoes what it was sent. A rank whose collective is late
// probes its peers: a peer that answers is alive; one whose socket refuses (the process is gone:
// the kernel closed its socket) or that does not answer within the probe timeout (its node is
// gone) is dead.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::mpi::detail {

// Fixed size: exchanged with one MPI_Allgather.
struct PeerAddress {
  char host[64] = {};
  std::uint16_t port = 0;  // 0: the rank has no responder (its guard is off)
  char ask[33] = {};       // hex; what a probe of this rank must send
  char answer[33] = {};    // hex; what this rank's answer begins with
};

// 16 random bytes (getrandom) in hex.
std::string NewNonce();

class LivenessResponder {
 public:
  // status() is called on the responder's thread for every probe: the line it answers.
  explicit LivenessResponder(std::function<std::string()> status);
  ~LivenessResponder();
  LivenessResponder(const LivenessResponder&) = delete;
  LivenessResponder& operator=(const LivenessResponder&) = delete;
  std::uint16_t port() const noexcept { return port_; }
  // This rank's address with fresh secrets, which the responder uses from now on (before the
  // exchange, so that no probe with the new secrets can find the old ones).
  PeerAddress Renew();

 private:
  std::function<std::string()> status_;
  std::mutex mu_;
  std::string ask_;     // under mu_; empty: answer no one
  std::string answer_;  // under mu_
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct ProbeResult {
  bool alive = false;
  std::string answer;  // alive: the peer's status line; dead: why we think so
};

// Connects to the responder of world rank `rank` at `peer`, sends its ask secret and reads its
// line; alive only when the line begins with the peer's answer secret and "rank <rank> " (the
// secret is stripped from `answer`). timeout_s bounds the whole probe.
ProbeResult ProbePeer(const PeerAddress& peer, int rank, double timeout_s);

// This host's address without a responder (port 0).
PeerAddress OwnAddress();

// Collective over world: every rank's address (`mine` on this rank), in rank order.
Status ExchangeAddresses(MPI_Comm world, const PeerAddress& mine, std::vector<PeerAddress>* out);

}  // namespace elastic::mpi::detail
