// A watchdog for MPI calls that can hang (spawn, connect, accept: Open MPI 4.1.4 with external
// PMIx hangs intermittently, see docs/runtime.md). Internal header.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace elastic::mpi::detail {

// Exit code of a process whose watchdog fired (EX_TEMPFAIL: the controller may retry).
inline constexpr int kExitWatchdog = 75;

// Arms on construction; Disarm() (or destruction) cancels it. When timeout_s passes first, it
// logs an error naming `what` and ends the process with _exit(kExitWatchdog): an MPI call that
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

}  // namespace elastic::mpi::detail
