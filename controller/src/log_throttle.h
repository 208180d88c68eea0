// At most one log line per period for a kind of event that a flood can repeat (refused
// connections, timed-out frames): the first event of a period is logged, the rest are counted,
// and the next logged line says how many were not.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace elastic::controller {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LogThrottle(Clock::duration period = std::chrono::seconds(10)) : period_(period) {}

  // True when this event is to be logged; `suffix` is then empty or says how many earlier
  // events were left out (" (N more like it not logged since ...)").
  bool Allow(Clock::time_point now, std::string& suffix) {
    suffix.clear();
    if (logged_once_ && now - last_ < period_) {
      ++suppressed_;
      return false;
    }
    if (suppressed_ > 0) {
      auto s = std::chrono::duration_cast<std::chrono::seconds>(now - last_).count();
      suffix = " (" + std::to_string(suppressed_) + " more like it not logged in the last " + std::to_string(s) + " s)";
    }
    suppressed_ = 0;
    last_ = now;
    logged_once_ = true;
    return true;
  }

 private:
  Clock::duration period_;
  Clock::time_point last_{};
  bool logged_once_ = false;
  uint64_t suppressed_ = 0;
};

}  // namespace elastic::controller
