// A watchdog for MPI calls that can hang (spawn, connect, accept: Open MPI 4.1.4 with external
// PMIx hangs intermittently, see docs/runtime.md). Internal header.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdint>
#include <string>
#include <thread>

#include "elastic/common/exit_codes.h"

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
// for every call. A collective that does not finish within timeout_s means a rank of the world
// died (SIGKILL, node failure) or hangs: MPI then errors out or, often, waits forever. The guard
// logs what hung and ends the process with kExitWorldLost. timeout_s <= 0 disables it.
class CollectiveGuard {
 public:
  explicit CollectiveGuard(double timeout_s);
  ~CollectiveGuard();
  CollectiveGuard(const CollectiveGuard&) = delete;
  CollectiveGuard& operator=(const CollectiveGuard&) = delete;
  // what must stay valid until Disarm() (a string literal).
  void Arm(const char* what, std::uint64_t step) noexcept;
  void Disarm() noexcept;
  double timeout_s() const noexcept { return timeout_s_; }

 private:
  double timeout_s_;
  std::atomic<std::int64_t> deadline_ns_{0};  // 0: disarmed
  std::atomic<const char*> what_{nullptr};
  std::atomic<std::uint64_t> step_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
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
