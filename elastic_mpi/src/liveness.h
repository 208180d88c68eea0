// The liveness side channel (internal header): tells a rank that is late at a collective from
// one that is gone. MPI cannot say it (a collective with a dead peer often just waits), and a
// rank busy in a checkpoint write, an evaluation or a data-loader stall is late, not dead.
//
// Every rank answers on a small TCP socket of its own, from a thread of its own (so it answers
// while its main thread computes or sleeps): one line, "rank R step S busy in WHAT". The
// addresses are exchanged after every change of the world. A rank whose collective is late
// probes its peers: a peer that answers is alive; one whose socket refuses (the process is gone:
// the kernel closed its socket) or that does not answer within the probe timeout (its node is
// gone) is dead.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "elastic/common/error.h"

namespace elastic::mpi::detail {

// Fixed size: exchanged with one MPI_Allgather.
struct PeerAddress {
  char host[64] = {};
  std::uint16_t port = 0;  // 0: the rank has no responder (its guard is off)
};

class LivenessResponder {
 public:
  // status() is called on the responder's thread for every probe: the line it answers.
  explicit LivenessResponder(std::function<std::string()> status);
  ~LivenessResponder();
  LivenessResponder(const LivenessResponder&) = delete;
  LivenessResponder& operator=(const LivenessResponder&) = delete;
  std::uint16_t port() const noexcept { return port_; }

 private:
  std::function<std::string()> status_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct ProbeResult {
  bool alive = false;
  std::string answer;  // alive: the peer's status line; dead: why we think so
};

// Connects to a peer's responder and reads its line; timeout_s bounds the whole probe.
ProbeResult ProbePeer(const PeerAddress& peer, double timeout_s);

// Collective over world: every rank's address (this rank's responder on `port`), in rank order.
Status ExchangeAddresses(MPI_Comm world, std::uint16_t port, std::vector<PeerAddress>* out);

}  // namespace elastic::mpi::detail
