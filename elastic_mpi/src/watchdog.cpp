#include "watchdog.h"

#include <unistd.h>

#include <chrono>

#include "elastic/common/log.h"

namespace elastic::mpi::detail {

Watchdog::Watchdog(std::string what, double timeout_s) : what_(std::move(what)) {
  if (timeout_s <= 0) {
    done_ = true;
    return;
  }
  thread_ = std::thread([this, timeout_s] {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    if (!cv_.wait_until(lock, deadline, [this] { return done_; })) {
      Log(LogLevel::kError, "elastic_mpi", what_, " did not finish within ", timeout_s,
          " s; the MPI library cannot cancel it, so this process exits with code ", kExitWatchdog);
      std::fflush(stderr);
      _exit(kExitWatchdog);
    }
  });
}

void Watchdog::Disarm() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Watchdog::~Watchdog() { Disarm(); }

}  // namespace elastic::mpi::detail
