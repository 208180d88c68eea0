#include "watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

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
          " s; the MPI library cannot cancel it, so this process exits with code ", kExitWorldLost);
      std::fflush(stderr);
      _exit(kExitWorldLost);
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

namespace {
std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

CollectiveGuard::CollectiveGuard(double timeout_s) : timeout_s_(timeout_s) {
  if (timeout_s <= 0) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    // Checks every second (more often for short timeouts): a hang is reported at most a second late.
    const auto period = std::chrono::duration<double>(std::clamp(timeout_s_ / 8, 0.05, 1.0));
    while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
      const std::int64_t deadline = deadline_ns_.load(std::memory_order_acquire);
      if (deadline != 0 && NowNs() > deadline) {
        const char* what = what_.load(std::memory_order_acquire);
        Log(LogLevel::kError, "elastic_mpi", what ? what : "a collective", " at step ",
            step_.load(std::memory_order_relaxed), " did not finish within ", timeout_s_,
            " s (ELASTIC_COLLECTIVE_TIMEOUT_S): a rank of the world died or hangs. Stopping this process with "
            "code ", kExitWorldLost, " so that the job can be restarted from its last checkpoint");
        std::fflush(stderr);
        _exit(kExitWorldLost);
      }
    }
  });
}

CollectiveGuard::~CollectiveGuard() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CollectiveGuard::Arm(const char* what, std::uint64_t step) noexcept {
  if (timeout_s_ <= 0) return;
  what_.store(what, std::memory_order_relaxed);
  step_.store(step, std::memory_order_relaxed);
  deadline_ns_.store(NowNs() + static_cast<std::int64_t>(timeout_s_ * 1e9), std::memory_order_release);
}

void CollectiveGuard::Disarm() noexcept { deadline_ns_.store(0, std::memory_order_release); }

}  // namespace elastic::mpi::detail
