// The runtime channel: a TCP server of length-prefixed, munge-signed JSON messages
// (docs/interfaces.md, section 3). Boost.Asio on one thread; each request is decoded,
// authenticated and handed to the handler, whose reply is signed and sent back. What the
// network may hold is bounded (connection_limits.h): connections in all, per uid and per
// address before authentication, unauthenticated body bytes, a started frame's time; a failing
// accept (no descriptors left) backs off instead of spinning.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include "connection_limits.h"
#include "elastic/common/config.h"
#include "elastic/common/error.h"
#include "log_throttle.h"

namespace elastic::controller {

class Server {
 public:
  using Handler = std::function<nlohmann::json(uid_t uid, const nlohmann::json& msg)>;

  Server(boost::asio::io_context& io, const std::string& munge_socket, Handler handler,
         ServerLimits limits = ServerLimits());
  ~Server();
  // Binds and listens; kUnavailable when the address is taken.
  Status Listen(const config::HostPort& address);
  // The bound port (useful with port 0 in tests).
  uint16_t port() const;
  void Stop();
  // New limits for what comes next (a reload); max_connections is lowered to what the
  // open-file limit allows, with a warning.
  void SetLimits(ServerLimits limits);

  struct Stats {
    uint64_t requests = 0;
    uint64_t refused = 0;              // malformed, oversized, unauthenticated, over a limit
    uint64_t refused_connections = 0;  // of those: over a connection cap or the byte budget
    uint64_t frame_timeouts = 0;       // connections closed in the middle of a frame
    uint64_t accept_failures = 0;      // accept() errors (no descriptors left, ...)
  };
  const Stats& stats() const { return stats_; }
  const ConnectionLimits& limits() const { return *limits_; }

 private:
  class Connection;
  enum class Throttled { kRefusal, kTimeout, kCount };
  void Accept();
  void AcceptFailed(const boost::system::error_code& ec);
  void LogThrottled(Throttled kind, const std::string& text);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_retry_;
  std::string munge_socket_;
  Handler handler_;
  // Shared with the connections, which give back what they hold even when they outlive the server.
  std::shared_ptr<ConnectionLimits> limits_ = std::make_shared<ConnectionLimits>();
  Stats stats_;
  LogThrottle throttles_[static_cast<int>(Throttled::kCount)];
  // The current episode of failing accepts: its last failure, the next wait, and the stretch of
  // failures now running (from the episode's first failure, or from a relapse after an accept
  // worked). Failures less than kAcceptEpisodeGap apart are one episode, so a process at its
  // descriptor limit that gets one back, accepts with it and fails again logs one error, not
  // one per connection.
  std::optional<std::chrono::steady_clock::time_point> accept_last_failure_;  // none: never failed
  std::chrono::steady_clock::time_point accept_stretch_since_{};
  uint64_t accept_stretch_failures_ = 0;
  std::chrono::milliseconds accept_backoff_{0};  // 0: accepting normally
  bool accept_recovery_logged_ = false;
};

}  // namespace elastic::controller
