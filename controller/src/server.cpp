#include "server.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "elastic/common/log.h"
#include "elastic/common/wire.h"

namespace elastic::controller {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
constexpr const char* kComponent = "server";
constexpr auto kIdleTimeout = std::chrono::seconds(300);
// A failing accept is retried after 100 ms, then twice as long each time, up to 1 s.
constexpr auto kFirstAcceptBackoff = std::chrono::milliseconds(100);
constexpr auto kMaxAcceptBackoff = std::chrono::milliseconds(1000);
constexpr auto kAcceptEpisodeGap = std::chrono::seconds(10);
constexpr auto kAcceptRelapseReported = std::chrono::seconds(1);
// A frame buffer larger than this is given back once its frame is decoded.
constexpr size_t kKeptBodyCapacity = 64 * 1024;

std::string Seconds(std::chrono::steady_clock::duration d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + " s";
}
}  // namespace

class Server::Connection : public std::enable_shared_from_this<Server::Connection> {
 public:
  Connection(Server& server, tcp::socket socket)
      : server_(server),
        limits_(server.limits_),
        socket_(std::move(socket)),
        timer_(server.io_),
        munge_(server.munge_socket_) {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    address_ = ec ? "?" : ep.address().to_string();
    peer_ = ec ? "?" : address_ + ":" + std::to_string(ep.port());
  }
  ~Connection() { Release(); }

  void Start() {
    Status admitted = limits_->Admit(address_);
    if (!admitted.ok()) return Refuse(admitted, 0);
    counted_ = true;
    ReadHeader(/*first=*/true);
  }

 private:
  std::chrono::milliseconds FrameTimeout() const { return limits_->limits().frame_timeout; }

  // The connection's one deadline. `late`: what the peer failed to do, logged when it passes
  // (null: an idle connection, closed quietly).
  void ArmTimer(std::chrono::steady_clock::duration after, const char* late) {
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), late](boost::system::error_code ec) {
      if (ec) return;
      if (late != nullptr) {
        self->server_.stats_.frame_timeouts++;
        self->server_.LogThrottled(Throttled::kTimeout, "closed the connection from " + self->peer_ + ": it " + late +
                                                            " within " + Seconds(self->FrameTimeout()) +
                                                            " (controller.frame_timeout)");
      }
      self->Close();
    });
  }

  // Gives back what the connection holds of the limits (idempotent).
  void Release() {
    if (reserved_ > 0) {
      limits_->ReleaseBody(reserved_);
      reserved_ = 0;
    }
    if (counted_) {
      limits_->Leave(address_, uid_);
      counted_ = false;
    }
  }

  void Close() {
    boost::system::error_code ec;
    socket_.close(ec);
    timer_.cancel();
    Release();
  }

  // Over a limit: an error reply (signed; `id` 0 when the request was not read), then close.
  void Refuse(const Status& why, int64_t id) {
    server_.stats_.refused++;
    server_.stats_.refused_connections++;
    server_.LogThrottled(Throttled::kRefusal, "refused the connection from " + peer_ + ": " + why.message());
    Reply(wire::MakeErrorReply(id, why), /*close_after=*/true);
  }

  // `first`: a new connection, whose whole first frame is due within the frame timeout;
  // otherwise the next frame may take up to the idle timeout to begin.
  void ReadHeader(bool first) {
    if (first) {
      ArmTimer(FrameTimeout(), "sent no complete message");
    } else {
      ArmTimer(kIdleTimeout, nullptr);
    }
    asio::async_read(socket_, asio::buffer(header_, 4), [self = shared_from_this(), first](boost::system::error_code ec, size_t) {
      if (ec) return self->Close();
      uint32_t len = 0;
      std::memcpy(&len, self->header_, 4);
      len = ntohl(len);
      if (len > wire::kMaxFrameBytes) {
        self->server_.stats_.refused++;
        self->server_.LogThrottled(Throttled::kRefusal, "refused a frame of " + std::to_string(len) + " bytes from " + self->peer_);
        // Refused unread (the frame was never authenticated), then closed.
        self->Reply(wire::MakeErrorReply(0, Status(ErrorKind::kProtocol,
                                                    "frame of " + std::to_string(len) + " bytes exceeds the limit of " +
                                                        std::to_string(wire::kMaxFrameBytes))),
                    /*close_after=*/true);
        return;
      }
      // Nothing is allocated for a body the budget of unauthenticated bytes cannot hold.
      Status budget = self->limits_->ReserveBody(len);
      if (!budget.ok()) return self->Refuse(budget, 0);
      self->reserved_ = len;
      self->body_.resize(len);
      self->ReadBody(first);
    });
  }

  void ReadBody(bool first) {
    if (!first) ArmTimer(FrameTimeout(), "did not send the rest of a frame");
    asio::async_read(socket_, asio::buffer(body_), [self = shared_from_this()](boost::system::error_code ec, size_t) {
      if (ec) return self->Close();
      self->HandleFrame();
    });
  }

  void ReleaseBody() {
    limits_->ReleaseBody(reserved_);
    reserved_ = 0;
    if (body_.capacity() > kKeptBodyCapacity) {
      std::string().swap(body_);
    } else {
      body_.clear();
    }
  }

  void HandleFrame() {
    server_.stats_.requests++;
    auto decoded = munge_.Decode(body_);
    ReleaseBody();
    if (!decoded.ok()) {
      server_.stats_.refused++;
      server_.LogThrottled(Throttled::kRefusal, "refused a message from " + peer_ + ": " + decoded.status().message());
      Reply(wire::MakeErrorReply(0, decoded.status()), true);
      return;
    }
    uid_t uid = decoded.value().uid;
    auto msg = wire::ParseMessage(decoded.value().payload);
    // Counted under its uid from its first authenticated message on.
    Status allowed = limits_->Authenticate(address_, uid_, uid);
    if (!allowed.ok()) {
      int64_t id = 0;
      if (msg.ok() && msg.value().contains("id") && msg.value()["id"].is_number_integer()) {
        id = msg.value()["id"].get<int64_t>();
      }
      return Refuse(allowed, id);
    }
    uid_ = uid;
    if (!msg.ok()) {
      server_.stats_.refused++;
      Log(LogLevel::kWarning, kComponent, "refused a message of uid ", uid, " from ", peer_, ": ", msg.status().message());
      Reply(wire::MakeErrorReply(0, msg.status()), false);
      return;
    }
    nlohmann::json reply = server_.handler_(uid, msg.value());
    Reply(reply, false);
  }

  void Reply(const nlohmann::json& reply, bool close_after) {
    auto cred = munge_.Encode(reply.dump());
    if (!cred.ok()) {
      Log(LogLevel::kError, kComponent, "cannot sign a reply: ", cred.status().message());
      return Close();
    }
    uint32_t len = htonl(static_cast<uint32_t>(cred.value().size()));
    out_.assign(reinterpret_cast<const char*>(&len), 4);
    out_ += cred.value();
    // A refused connection gets the frame timeout to take its reply; any other the idle timeout.
    if (close_after) {
      ArmTimer(FrameTimeout(), nullptr);
    } else {
      ArmTimer(kIdleTimeout, nullptr);
    }
    asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this(), close_after](boost::system::error_code ec, size_t) {
      if (ec || close_after) return self->Close();
      self->ReadHeader(/*first=*/false);
    });
  }

  Server& server_;
  std::shared_ptr<ConnectionLimits> limits_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  wire::Munge munge_;
  std::string address_;  // the peer's address, counted against its unauthenticated cap
  std::string peer_;     // address:port, for the log
  bool counted_ = false;
  std::optional<uid_t> uid_;  // of its last authenticated message
  uint32_t reserved_ = 0;     // bytes of the unauthenticated budget held by the body being read
  unsigned char header_[4] = {0, 0, 0, 0};
  std::string body_;
  std::string out_;
};

Server::Server(asio::io_context& io, const std::string& munge_socket, Handler handler, ServerLimits limits)
    : io_(io), acceptor_(io), accept_retry_(io), munge_socket_(munge_socket), handler_(std::move(handler)) {
  SetLimits(std::move(limits));
}

Server::~Server() { Stop(); }

void Server::SetLimits(ServerLimits limits) {
  std::string shortfall = DescriptorShortfall(limits.max_connections);
  if (!shortfall.empty()) {
    Log(LogLevel::kWarning, kComponent, shortfall);
    limits.max_connections = std::max<int64_t>(1, ConnectionsTheDescriptorsAllow());
  }
  limits_->SetLimits(std::move(limits));
}

Status Server::Listen(const config::HostPort& address) {
  boost::system::error_code ec;
  tcp::resolver resolver(io_);
  auto results = resolver.resolve(address.host, std::to_string(address.port), ec);
  if (ec || results.empty()) return Status(ErrorKind::kConfig, "cannot resolve " + address.ToString() + ": " + ec.message());
  tcp::endpoint ep = results.begin()->endpoint();
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status(ErrorKind::kUnavailable, "cannot listen on " + address.ToString() + ": " + ec.message());
  Accept();
  return Status::Ok();
}

uint16_t Server::port() const {
  boost::system::error_code ec;
  return acceptor_.local_endpoint(ec).port();
}

void Server::Stop() {
  boost::system::error_code ec;
  acceptor_.close(ec);
  accept_retry_.cancel();
}

void Server::LogThrottled(Throttled kind, const std::string& text) {
  std::string suffix;
  if (throttles_[static_cast<int>(kind)].Allow(LogThrottle::Clock::now(), suffix)) {
    Log(LogLevel::kWarning, kComponent, text, suffix);
  }
}

void Server::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) return AcceptFailed(ec);
    if (accept_backoff_.count() > 0) {
      if (!accept_recovery_logged_) {
        Log(LogLevel::kInfo, kComponent, "accepting connections again after ",
            Seconds(std::chrono::steady_clock::now() - accept_stretch_since_), " (", accept_stretch_failures_,
            " accepts failed)");
        accept_recovery_logged_ = true;
      }
      accept_backoff_ = std::chrono::milliseconds(0);
    }
    try {
      std::make_shared<Connection>(*this, std::move(socket))->Start();
    } catch (const std::exception& e) {
      Log(LogLevel::kError, kComponent, "cannot serve a connection: ", e.what());
    }
    Accept();
  });
}

// The connection stays in the listen queue; accepting again at once would fail again at once
// (a spinning loop while descriptors are exhausted). One line per episode, then a timer. An
// accept fails at the limit even with no connection waiting (the descriptor is taken first), so
// the accept that follows one made with the last free descriptor fails at once: that is the same
// episode, not a new one.
void Server::AcceptFailed(const boost::system::error_code& ec) {
  stats_.accept_failures++;
  auto now = std::chrono::steady_clock::now();
  bool same_episode = accept_last_failure_ && now - *accept_last_failure_ < kAcceptEpisodeGap;
  accept_last_failure_ = now;
  if (same_episode && accept_backoff_.count() == 0) {
    accept_backoff_ = kFirstAcceptBackoff;  // failing again after an accept worked
    accept_stretch_since_ = now;
    accept_stretch_failures_ = 0;
  } else if (!same_episode) {
    accept_recovery_logged_ = false;
    accept_stretch_since_ = now;
    accept_stretch_failures_ = 0;
    accept_backoff_ = kFirstAcceptBackoff;
    bool descriptors = ec.category() == boost::system::system_category() && (ec.value() == EMFILE || ec.value() == ENFILE);
    Log(LogLevel::kError, kComponent, "cannot accept connections: ", ec.message(), " (", limits_->open(),
        " connections open)",
        descriptors ? "; no file descriptors left: raise LimitNOFILE in elasticd's unit or lower controller.max_connections"
                    : "",
        "; retrying every ", kFirstAcceptBackoff.count(), "-", kMaxAcceptBackoff.count(),
        " ms, connections already open are served");
  } else {
    accept_backoff_ = std::min(accept_backoff_ * 2, std::chrono::milliseconds(kMaxAcceptBackoff));
    // Said to be accepting again, but failing for a second or more since: say so (and say when
    // it works once more), at most one pair of lines per such stretch.
    if (accept_recovery_logged_ && now - accept_stretch_since_ >= kAcceptRelapseReported) {
      Log(LogLevel::kError, kComponent, "cannot accept connections again: ", ec.message(), " (",
          accept_stretch_failures_ + 1, " accepts failed in the last ", Seconds(now - accept_stretch_since_),
          "); retrying every ", kFirstAcceptBackoff.count(), "-", kMaxAcceptBackoff.count(), " ms");
      accept_recovery_logged_ = false;
    }
  }
  accept_stretch_failures_++;
  accept_retry_.expires_after(accept_backoff_);
  accept_retry_.async_wait([this](boost::system::error_code wait_ec) {
    if (!wait_ec) Accept();
  });
}

}  // namespace elastic::controller
