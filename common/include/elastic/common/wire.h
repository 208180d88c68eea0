// The wire protocol between the plugin, the runtime, elasticctl and elasticd
// (docs/interfaces.md, section 3).
//
// A frame is a 4-byte big-endian length followed by that many bytes: a munge credential whose
// payload is one JSON message. This header holds the framing, the munge codec, the message
// envelope and a blocking client with deadlines (used by the plugin and the runtime, which must
// never hang on an unreachable controller).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "elastic/common/config.h"
#include "elastic/common/error.h"

namespace elastic::wire {

inline constexpr int kProtocolVersion = 1;
inline constexpr uint32_t kMaxFrameBytes = 1u << 20;        // 1 MiB: the credential text
inline constexpr size_t kMaxMessageBytes = 512u * 1024u;     // the JSON message inside it

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Writes one frame (length + body) to a connected stream socket before `deadline`.
// Retries on EINTR and partial writes. kTimeout when the deadline passes, kUnavailable on
// a socket error (the connection is then unusable).
Status WriteFrame(int fd, std::string_view body, Deadline deadline);

// Reads one frame before `deadline`. A length above `max_bytes` is refused with kProtocol
// without reading the body (the connection must then be closed). kUnavailable when the peer
// closed the connection (message "connection closed" when it did so between frames).
Result<std::string> ReadFrame(int fd, Deadline deadline, uint32_t max_bytes = kMaxFrameBytes);

// munge credentials: thin owner of a munge context. Not thread-safe; one per thread.
class Munge {
 public:
  // `socket_path` empty: munge's default socket.
  explicit Munge(const std::string& socket_path = "");
  ~Munge();
  Munge(const Munge&) = delete;
  Munge& operator=(const Munge&) = delete;

  // A credential carrying `payload`, for the calling process's uid/gid. kUnavailable when
  // munged cannot be reached.
  Result<std::string> Encode(std::string_view payload);

  struct Decoded {
    uid_t uid = 0;
    gid_t gid = 0;
    std::string payload;
  };
  // Verifies a credential: kPermission for a replayed, expired, or invalid credential,
  // kUnavailable when munged cannot be reached.
  Result<Decoded> Decode(const std::string& credential);

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// Checks the envelope of a decoded payload: a JSON object of at most kMaxMessageBytes with an
// integer "v" this build speaks and a string "type". kProtocol otherwise, with the reason.
Result<nlohmann::json> ParseMessage(std::string_view payload);

// A reply to request `id`: {"v":1,"type":"reply","id":id,"ok":true} plus `fields`.
nlohmann::json MakeReply(int64_t id, nlohmann::json fields = nlohmann::json::object());
// An error reply: {"v":1,"type":"reply","id":id,"ok":false,"error":{"kind":..,"message":..}}.
nlohmann::json MakeErrorReply(int64_t id, const Status& status);
// The Status of a reply: ok, or its error (kind and message); kProtocol when the reply is
// not a well-formed reply.
Status ReplyStatus(const nlohmann::json& reply);

struct ClientOptions {
  std::string munge_socket;                   // empty: munge's default
  std::chrono::milliseconds connect_timeout{2000};
  std::set<uid_t> trusted_uids{0};            // whose replies are accepted (root, SlurmUser)
};

// A blocking client: one connection, requests answered in turn.
class Client {
 public:
  // Connects to `address` (every address the host resolves to is tried) within the connect
  // timeout. kUnavailable with the reason ("connection refused", "timed out") otherwise.
  static Result<std::unique_ptr<Client>> Connect(const config::HostPort& address, ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `request` (its "v" and "id" are set here) and returns the reply's JSON, after
  // checking the reply's credential comes from a trusted uid and answers this request.
  // Errors: kTimeout, kUnavailable, kProtocol, kPermission (untrusted reply). An error reply
  // from the server is returned as a reply, not as an error: use ReplyStatus(). So is a
  // refusal of the request before the server read it (an error reply with id 0).
  Result<nlohmann::json> Call(nlohmann::json request, std::chrono::milliseconds timeout);

 private:
  Client(int fd, ClientOptions options);
  int fd_;
  ClientOptions options_;
  Munge munge_;
  int64_t next_id_ = 1;
};

}  // namespace elastic::wire
