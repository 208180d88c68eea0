// The runtime channel: a TCP server of length-prefixed, munge-signed JSON messages
// (docs/interfaces.md, section 3). Boost.Asio on one thread; each request is decoded,
// authenticated and handed to the handler, whose reply is signed and sent back.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include "elastic/common/config.h"
#include "elastic/common/error.h"

namespace elastic::controller {

class Server {
 public:
  using Handler = std::function<nlohmann::json(uid_t uid, const nlohmann::json& msg)>;

  Server(boost::asio::io_context& io, const std::string& munge_socket, Handler handler);
  ~Server();
  // Binds and listens; kUnavailable when the address is taken.
  Status Listen(const config::HostPort& address);
  // The bound port (useful with port 0 in tests).
  uint16_t port() const;
  void Stop();

  struct Stats {
    uint64_t requests = 0;
    uint64_t refused = 0;  // malformed, oversized, unauthenticated
  };
  const Stats& stats() const { return stats_; }

 private:
  class Connection;
  void Accept();
  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::string munge_socket_;
  Handler handler_;
  Stats stats_;
};

}  // namespace elastic::controller
