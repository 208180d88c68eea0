#include "elastic/common/wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <munge.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace elastic::wire {
namespace {

int RemainingMs(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 60 * 60 * 1000 ? 60 * 60 * 1000 : static_cast<int>(left);
}

// Waits until fd is readable/writable or the deadline passes.
Status WaitFd(int fd, short events, Deadline deadline, const char* what) {
  while (true) {
    pollfd p{fd, events, 0};
    int ms = RemainingMs(deadline);
    int r = ::poll(&p, 1, ms);
    if (r > 0) return Status::Ok();
    if (r == 0) return Status(ErrorKind::kTimeout, std::string("timed out ") + what);
    if (errno != EINTR) return Status(ErrorKind::kUnavailable, std::string("poll: ") + std::strerror(errno));
  }
}

Status WriteAll(int fd, const char* data, size_t size, Deadline deadline) {
  while (size > 0) {
    Status s = WaitFd(fd, POLLOUT, deadline, "sending");
    if (!s.ok()) return s;
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return Status(ErrorKind::kUnavailable, std::string("send: ") + std::strerror(errno));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Reads exactly size bytes. `between_frames`: a close before the first byte is a clean close.
Status ReadAll(int fd, char* data, size_t size, Deadline deadline, bool between_frames) {
  size_t got = 0;
  while (got < size) {
    Status s = WaitFd(fd, POLLIN, deadline, "waiting for data");
    if (!s.ok()) return s;
    ssize_t n = ::recv(fd, data + got, size - got, MSG_DONTWAIT);
    if (n == 0) {
      return Status(ErrorKind::kUnavailable,
                    between_frames && got == 0 ? "connection closed" : "connection closed in the middle of a frame");
    }
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return Status(ErrorKind::kUnavailable, std::string("recv: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status WriteFrame(int fd, std::string_view body, Deadline deadline) {
  if (body.size() > kMaxFrameBytes) {
    return Status(ErrorKind::kInvalidArgument,
                  "frame of " + std::to_string(body.size()) + " bytes exceeds the limit of " +
                      std::to_string(kMaxFrameBytes));
  }
  uint32_t len = htonl(static_cast<uint32_t>(body.size()));
  std::string buf(reinterpret_cast<const char*>(&len), sizeof len);
  buf.append(body);
  return WriteAll(fd, buf.data(), buf.size(), deadline);
}

Result<std::string> ReadFrame(int fd, Deadline deadline, uint32_t max_bytes) {
  uint32_t len_be = 0;
  Status s = ReadAll(fd, reinterpret_cast<char*>(&len_be), sizeof len_be, deadline, true);
  if (!s.ok()) return s;
  uint32_t len = ntohl(len_be);
  if (len > max_bytes) {
    return Status(ErrorKind::kProtocol, "frame of " + std::to_string(len) + " bytes exceeds the limit of " +
                                            std::to_string(max_bytes));
  }
  std::string body(len, '\0');
  s = ReadAll(fd, body.data(), len, deadline, false);
  if (!s.ok()) return s;
  return body;
}

// ---------------------------------------------------------------- munge
// Two contexts: munge_decode() overwrites its context with the settings of the credential it
// read (even a bad one), which must never leak into the next encode.
struct Munge::Ctx {
  munge_ctx_t encode = nullptr;
  munge_ctx_t decode = nullptr;
};

Munge::Munge(const std::string& socket_path) : ctx_(std::make_unique<Ctx>()) {
  ctx_->encode = munge_ctx_create();
  ctx_->decode = munge_ctx_create();
  if (ctx_->encode == nullptr || ctx_->decode == nullptr) {
    if (ctx_->encode) munge_ctx_destroy(ctx_->encode);
    if (ctx_->decode) munge_ctx_destroy(ctx_->decode);
    throw Error(ErrorKind::kInternal, "munge_ctx_create failed (out of memory)");
  }
  if (!socket_path.empty()) {
    for (munge_ctx_t c : {ctx_->encode, ctx_->decode}) {
      munge_err_t e = munge_ctx_set(c, MUNGE_OPT_SOCKET, socket_path.c_str());
      if (e != EMUNGE_SUCCESS) {
        munge_ctx_destroy(ctx_->encode);
        munge_ctx_destroy(ctx_->decode);
        throw Error(ErrorKind::kConfig, "munge socket '" + socket_path + "': " + munge_strerror(e));
      }
    }
  }
}

Munge::~Munge() {
  if (ctx_) {
    if (ctx_->encode) munge_ctx_destroy(ctx_->encode);
    if (ctx_->decode) munge_ctx_destroy(ctx_->decode);
  }
}

Result<std::string> Munge::Encode(std::string_view payload) {
  char* cred = nullptr;
  munge_err_t e = munge_encode(&cred, ctx_->encode, payload.data(), static_cast<int>(payload.size()));
  if (e != EMUNGE_SUCCESS) {
    const char* msg = munge_ctx_strerror(ctx_->encode);
    return Status(ErrorKind::kUnavailable, std::string("munge encode: ") + (msg ? msg : munge_strerror(e)));
  }
  std::string out(cred);
  std::free(cred);
  return out;
}

Result<Munge::Decoded> Munge::Decode(const std::string& credential) {
  void* buf = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  munge_err_t e = munge_decode(credential.c_str(), ctx_->decode, &buf, &len, &uid, &gid);
  std::string payload;
  if (buf != nullptr) {
    payload.assign(static_cast<const char*>(buf), static_cast<size_t>(len));
    std::free(buf);
  }
  if (e != EMUNGE_SUCCESS) {
    const char* msg = munge_ctx_strerror(ctx_->decode);
    std::string text = std::string("munge decode: ") + (msg ? msg : munge_strerror(e));
    bool unreachable = e == EMUNGE_SOCKET || e == EMUNGE_TIMEOUT;
    return Status(unreachable ? ErrorKind::kUnavailable : ErrorKind::kPermission, text);
  }
  return Decoded{uid, gid, std::move(payload)};
}

// ---------------------------------------------------------------- envelope
Result<nlohmann::json> ParseMessage(std::string_view payload) {
  if (payload.size() > kMaxMessageBytes) {
    return Status(ErrorKind::kProtocol, "message of " + std::to_string(payload.size()) +
                                            " bytes exceeds the limit of " + std::to_string(kMaxMessageBytes));
  }
  nlohmann::json msg = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded()) return Status(ErrorKind::kProtocol, "message is not valid JSON");
  if (!msg.is_object()) return Status(ErrorKind::kProtocol, "message is not a JSON object");
  auto v = msg.find("v");
  if (v == msg.end() || !v->is_number_integer()) {
    return Status(ErrorKind::kProtocol, "message has no integer protocol version \"v\"");
  }
  if (v->get<int64_t>() != kProtocolVersion) {
    return Status(ErrorKind::kProtocol, "unsupported protocol version " + std::to_string(v->get<int64_t>()) +
                                            " (this side speaks " + std::to_string(kProtocolVersion) + ")");
  }
  auto type = msg.find("type");
  if (type == msg.end() || !type->is_string() || type->get_ref<const std::string&>().empty()) {
    return Status(ErrorKind::kProtocol, "message has no \"type\"");
  }
  return msg;
}

nlohmann::json MakeReply(int64_t id, nlohmann::json fields) {
  nlohmann::json r = std::move(fields);
  if (!r.is_object()) r = nlohmann::json::object();
  r["v"] = kProtocolVersion;
  r["type"] = "reply";
  r["id"] = id;
  r["ok"] = true;
  return r;
}

nlohmann::json MakeErrorReply(int64_t id, const Status& status) {
  return {{"v", kProtocolVersion},
          {"type", "reply"},
          {"id", id},
          {"ok", false},
          {"error", {{"kind", std::string(ErrorKindName(status.kind()))}, {"message", status.message()}}}};
}

Status ReplyStatus(const nlohmann::json& reply) {
  if (!reply.is_object() || reply.value("type", "") != "reply" || !reply.contains("ok") || !reply["ok"].is_boolean()) {
    return Status(ErrorKind::kProtocol, "not a reply");
  }
  if (reply["ok"].get<bool>()) return Status::Ok();
  // A peer's malformed error is a protocol error, never an exception escaping to the caller.
  auto err = reply.find("error");
  if (err == reply.end() || !err->is_object()) return Status(ErrorKind::kProtocol, "error reply without an error object");
  auto kind_it = err->find("kind");
  auto message_it = err->find("message");
  if ((kind_it != err->end() && !kind_it->is_string()) || (message_it != err->end() && !message_it->is_string())) {
    return Status(ErrorKind::kProtocol, "error reply with a malformed kind or message");
  }
  std::string kind = kind_it != err->end() ? kind_it->get<std::string>() : "internal";
  std::string message = message_it != err->end() ? message_it->get<std::string>() : "error without a message";
  for (ErrorKind k : {ErrorKind::kInvalidArgument, ErrorKind::kConfig, ErrorKind::kUnavailable,
                      ErrorKind::kPermission, ErrorKind::kNotFound, ErrorKind::kTimeout, ErrorKind::kProtocol}) {
    if (ErrorKindName(k) == kind) return Status(k, message);
  }
  return Status(ErrorKind::kInternal, message);
}

// ---------------------------------------------------------------- client
Client::Client(int fd, ClientOptions options) : fd_(fd), options_(std::move(options)), munge_(options_.munge_socket) {}

Client::~Client() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<Client>> Client::Connect(const config::HostPort& address, ClientOptions options) {
  Deadline deadline = Clock::now() + options.connect_timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port = std::to_string(address.port);
  int gai = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &res);
  if (gai != 0) {
    return Status(ErrorKind::kUnavailable, "cannot resolve '" + address.host + "': " + gai_strerror(gai));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int r = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      Status s = WaitFd(fd, POLLOUT, deadline, "connecting");
      if (!s.ok()) {
        last_error = "timed out";
        ::close(fd);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      r = err == 0 ? 0 : -1;
      errno = err;
    }
    if (r != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    ::freeaddrinfo(res);
    try {
      return std::unique_ptr<Client>(new Client(fd, std::move(options)));
    } catch (const Error& e) {
      ::close(fd);
      return Status(e.kind(), e.what());
    }
  }
  ::freeaddrinfo(res);
  return Status(ErrorKind::kUnavailable, "cannot connect to " + address.ToString() + ": " + last_error);
}

Result<nlohmann::json> Client::Call(nlohmann::json request, std::chrono::milliseconds timeout) {
  Deadline deadline = Clock::now() + timeout;
  int64_t id = next_id_++;
  request["v"] = kProtocolVersion;
  request["id"] = id;
  std::string payload = request.dump();
  if (payload.size() > kMaxMessageBytes) {
    return Status(ErrorKind::kInvalidArgument, "request of " + std::to_string(payload.size()) +
                                                   " bytes exceeds the message limit");
  }
  auto cred = munge_.Encode(payload);
  if (!cred.ok()) return cred.status();
  Status s = WriteFrame(fd_, cred.value(), deadline);
  if (!s.ok()) return s;
  auto frame = ReadFrame(fd_, deadline);
  if (!frame.ok()) return frame.status();
  auto decoded = munge_.Decode(frame.value());
  if (!decoded.ok()) return decoded.status();
  if (!options_.trusted_uids.count(decoded.value().uid)) {
    return Status(ErrorKind::kPermission,
                  "reply signed by uid " + std::to_string(decoded.value().uid) + ", which is not the controller's");
  }
  auto reply = ParseMessage(decoded.value().payload);
  if (!reply.ok()) return reply.status();
  const auto& r = reply.value();
  // Id 0 with ok false: the server refused the request before it could read its id (over a
  // limit, oversized, unauthenticated); that refusal is the answer.
  bool refusal = r.value("type", "") == "reply" && r.contains("id") && r["id"].is_number_integer() &&
                 r["id"].get<int64_t>() == 0 && r.contains("ok") && r["ok"].is_boolean() && !r["ok"].get<bool>();
  if (refusal) return reply;
  if (r.value("type", "") != "reply" || !r.contains("id") || !r["id"].is_number_integer() ||
      r["id"].get<int64_t>() != id) {
    return Status(ErrorKind::kProtocol, "reply does not answer request " + std::to_string(id));
  }
  return reply;
}

}  // namespace elastic::wire
