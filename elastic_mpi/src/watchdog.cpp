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

CollectiveGuard::CollectiveGuard(double timeout_s, double stall_timeout_s, double probe_timeout_s)
    : timeout_s_(timeout_s), stall_timeout_s_(stall_timeout_s), probe_timeout_s_(probe_timeout_s) {
  if (timeout_s <= 0) return;
  responder_ = std::make_unique<LivenessResponder>([this] { return StatusLine(); });
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    // Checks every second (more often for short timeouts): a hang is reported at most a second late.
    const auto period = std::chrono::duration<double>(std::clamp(timeout_s_ / 8, 0.05, 1.0));
    while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
      const std::int64_t deadline = deadline_ns_.load(std::memory_order_acquire);
      if (deadline == 0 || NowNs() <= deadline) continue;
      const std::int64_t armed = armed_ns_.load(std::memory_order_acquire);
      lock.unlock();
      const bool alive = PeersAlive(armed);
      lock.lock();
      if (alive) {
        // Late, not dead: another timeout_s, unless the collective finished (or another began)
        // while we probed.
        std::int64_t expected = deadline;
        deadline_ns_.compare_exchange_strong(expected, NowNs() + static_cast<std::int64_t>(timeout_s_ * 1e9));
        continue;
      }
      std::fflush(stderr);
      _exit(kExitWorldLost);
    }
  });
}

std::string CollectiveGuard::StatusLine() const {
  const char* what = what_.load(std::memory_order_acquire);
  const bool armed = deadline_ns_.load(std::memory_order_acquire) != 0;
  return "rank " + std::to_string(self_.load(std::memory_order_relaxed)) +
         (armed && what ? std::string(" busy in ") + what : std::string(" outside collectives (computing)")) +
         " at step " + std::to_string(step_.load(std::memory_order_relaxed));
}

void CollectiveGuard::SetPeers(std::vector<PeerAddress> peers, int self) {
  std::lock_guard<std::mutex> lock(mu_);
  peers_ = std::move(peers);
  self_.store(self, std::memory_order_relaxed);
}

bool CollectiveGuard::PeersAlive(std::int64_t armed_ns) {
  std::vector<PeerAddress> peers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    peers = peers_;
  }
  const char* what = what_.load(std::memory_order_acquire);
  const std::string where = std::string(what ? what : "a collective") + " at step " +
                            std::to_string(step_.load(std::memory_order_relaxed));
  const double waited = static_cast<double>(NowNs() - armed_ns) / 1e9;
  const int self = self_.load(std::memory_order_relaxed);
  std::string busy;  // the peers that are not in a collective: why we wait
  int listed = 0;
  for (std::size_t r = 0; r < peers.size(); ++r) {
    if (static_cast<int>(r) == self) continue;
    const ProbeResult probe = ProbePeer(peers[r], static_cast<int>(r), probe_timeout_s_);
    if (!probe.alive) {
      Log(LogLevel::kError, "elastic_mpi", where, " did not finish within ", waited,
          " s and rank ", r, " does not answer (", probe.answer, "): a rank of the world died. Stopping this process "
          "with code ", kExitWorldLost, " so that the job can be restarted from its last checkpoint");
      return false;
    }
    if (probe.answer.find("outside collectives") != std::string::npos && listed < 4) {
      busy += (listed++ ? "; " : "") + probe.answer;
    }
  }
  if (stall_timeout_s_ > 0 && waited >= stall_timeout_s_) {
    Log(LogLevel::kError, "elastic_mpi", where, " has waited ", waited,
        " s with every rank alive (ELASTIC_STALL_TIMEOUT_S ", stall_timeout_s_,
        "): the world is stuck. Stopping this process with code ", kExitWorldLost);
    return false;
  }
  Log(LogLevel::kWarning, "elastic_mpi", where, " is late (", waited, " s, ELASTIC_COLLECTIVE_TIMEOUT_S ", timeout_s_,
      "), but every rank is alive", busy.empty() ? std::string() : ": " + busy, "; waiting on");
  return true;
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
  const std::int64_t now = NowNs();
  armed_ns_.store(now, std::memory_order_relaxed);
  deadline_ns_.store(now + static_cast<std::int64_t>(timeout_s_ * 1e9), std::memory_order_release);
}

void CollectiveGuard::Disarm() noexcept { deadline_ns_.store(0, std::memory_order_release); }

}  // namespace elastic::mpi::detail
