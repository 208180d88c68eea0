#include "server.h"

#include <arpa/inet.h>

#include <chrono>

#include "elastic/common/log.h"
#include "elastic/common/wire.h"

namespace elastic::controller {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
constexpr const char* kComponent = "server";
constexpr auto kIdleTimeout = std::chrono::seconds(300);
}  // namespace

class Server::Connection : public std::enable_shared_from_this<Server::Connection> {
 public:
  Connection(Server& server, tcp::socket socket)
      : server_(server), socket_(std::move(socket)), timer_(server.io_), munge_(server.munge_socket_) {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? "?" : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  void Start() { ReadHeader(); }

 private:
  void ArmTimer() {
    timer_.expires_after(kIdleTimeout);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->Close();
    });
  }

  void Close() {
    boost::system::error_code ec;
    socket_.close(ec);
    timer_.cancel();
  }

  void ReadHeader() {
    ArmTimer();
    asio::async_read(socket_, asio::buffer(header_, 4), [self = shared_from_this()](boost::system::error_code ec, size_t) {
      if (ec) return self->Close();
      uint32_t len = 0;
      std::memcpy(&len, self->header_, 4);
      len = ntohl(len);
      if (len > wire::kMaxFrameBytes) {
        self->server_.stats_.refused++;
        Log(LogLevel::kWarning, kComponent, "refused a frame of ", len, " bytes from ", self->peer_);
        // Unsigned refusal (the frame was never authenticated), then close.
        self->Reply(wire::MakeErrorReply(0, Status(ErrorKind::kProtocol,
                                                    "frame of " + std::to_string(len) + " bytes exceeds the limit of " +
                                                        std::to_string(wire::kMaxFrameBytes))),
                    /*close_after=*/true);
        return;
      }
      self->body_.resize(len);
      self->ReadBody();
    });
  }

  void ReadBody() {
    asio::async_read(socket_, asio::buffer(body_), [self = shared_from_this()](boost::system::error_code ec, size_t) {
      if (ec) return self->Close();
      self->HandleFrame();
    });
  }

  void HandleFrame() {
    server_.stats_.requests++;
    auto decoded = munge_.Decode(body_);
    if (!decoded.ok()) {
      server_.stats_.refused++;
      Log(LogLevel::kWarning, kComponent, "refused a message from ", peer_, ": ", decoded.status().message());
      Reply(wire::MakeErrorReply(0, decoded.status()), true);
      return;
    }
    auto msg = wire::ParseMessage(decoded.value().payload);
    if (!msg.ok()) {
      server_.stats_.refused++;
      Log(LogLevel::kWarning, kComponent, "refused a message of uid ", decoded.value().uid, " from ", peer_, ": ",
          msg.status().message());
      Reply(wire::MakeErrorReply(0, msg.status()), false);
      return;
    }
    nlohmann::json reply = server_.handler_(decoded.value().uid, msg.value());
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
    asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this(), close_after](boost::system::error_code ec, size_t) {
      if (ec || close_after) return self->Close();
      self->ReadHeader();
    });
  }

  Server& server_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  wire::Munge munge_;
  std::string peer_;
  unsigned char header_[4] = {0, 0, 0, 0};
  std::string body_;
  std::string out_;
};

Server::Server(asio::io_context& io, const std::string& munge_socket, Handler handler)
    : io_(io), acceptor_(io), munge_socket_(munge_socket), handler_(std::move(handler)) {}

Server::~Server() { Stop(); }

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
}

void Server::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      try {
        std::make_shared<Connection>(*this, std::move(socket))->Start();
      } catch (const std::exception& e) {
        Log(LogLevel::kError, kComponent, "cannot serve a connection: ", e.what());
      }
    }
    Accept();
  });
}

}  // namespace elastic::controller
