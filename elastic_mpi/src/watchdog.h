// A watchdog for MPI calls that can hang (spawn, connect, accept: Open MPI 4.1.4 with external
// PMIx hangs intermittently, see docs/runtime.md). Internal header.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <vector>

#include "elastic/common/exit_codes.h"
#include "liveness.h"

namespace elastic::mpi::detail {

// Arms on construction; Disarm() (or destruction) cancels it. When timeout_s passes first, it
// logs an error naming `what` and ends the process with _exit(kExitWorldLost): an MPI call that
// does not return cannot be cancelled, and a clear stop lets the controller restart the job from
// its last checkpoint instead of hanging silently. timeout_s <= 0 disables the watchdog.
class Watchdog {
 public:
  Watchdog(std::string what, double timeout_s);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  void Disarm();

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// One long-lived thread that guards the collectives of every step (the rescale point's
// allreduce, the backend's collectives): arming and disarming is two atomic stores, cheap enough
// for every call. A collective that does not finish within timeout_s is late: the guard then
// probes every peer through the liveness side channel (liveness.h). A peer that is gone (SIGKILL,
// node failure) ends the world: the guard logs what hung and who is gone and ends the process
// with kExitWorldLost. When every peer answers, the collective is only late (a checkpoint write,
// an evaluation on rank 0, a data-loader stall): the guard logs who is busy where and waits
// another timeout_s, up to stall_timeout_s in all (a world alive but stuck ends then; <= 0: never).
// timeout_s <= 0 disables the guard.
class CollectiveGuard {
 public:
  CollectiveGuard(double timeout_s, double stall_timeout_s, double probe_timeout_s);
  ~CollectiveGuard();
  CollectiveGuard(const CollectiveGuard&) = delete;
  CollectiveGuard& operator=(const CollectiveGuard&) = delete;
  // what must stay valid until Disarm() (a string literal).
  void Arm(const char* what, std::uint64_t step) noexcept;
  void Disarm() noexcept;
  double timeout_s() const noexcept { return timeout_s_; }
  // This rank's liveness address with fresh secrets (port 0: no responder), for the exchange
  // after a change of the world (LivenessResponder::Renew).
  PeerAddress RenewAddress() { return responder_ ? responder_->Renew() : OwnAddress(); }
  // The world's addresses after a change (ExchangeAddresses) and this rank's index in them.
  void SetPeers(std::vector<PeerAddress> peers, int self);

 private:
  std::string StatusLine() const;  // this rank's answer to a probe
  // At a missed deadline: true when every peer answered (the deadline is then extended).
  bool PeersAlive(std::int64_t armed_ns);

  double timeout_s_;
  double stall_timeout_s_;
  double probe_timeout_s_;
  std::atomic<std::int64_t> deadline_ns_{0};  // 0: disarmed
  std::atomic<std::int64_t> armed_ns_{0};     // when the current collective began
  std::atomic<const char*> what_{nullptr};
  std::atomic<std::uint64_t> step_{0};
  std::atomic<int> self_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<PeerAddress> peers_;  // under mu_
  std::unique_ptr<LivenessResponder> responder_;
  std::thread thread_;
};

// Arms a guard for one scope (null guard: nothing).
class GuardScope {
 public:
  GuardScope(CollectiveGuard* guard, const char* what, std::uint64_t step) noexcept : guard_(guard) {
    if (guard_) guard_->Arm(what, step);
  }
  ~GuardScope() {
    if (guard_) guard_->Disarm();
  }
  GuardScope(const GuardScope&) = delete;
  GuardScope& operator=(const GuardScope&) = delete;

 private:
  CollectiveGuard* guard_;
};

}  // namespace elastic::mpi::detail
