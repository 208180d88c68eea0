// What elasticd's runtime channel lets the network hold (docs/interfaces.md, section 8): open
// connections in all, per authenticated uid and, before authentication, per peer address; the
// body bytes it reads before munge has said who sent them; how long a started frame may take.
// The server asks these counts before it accepts, authenticates or reads; a refusal is a
// kUnavailable Status that names the limit and its configuration key.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "elastic/common/error.h"

namespace elastic::controller {

struct ServerLimits {
  int64_t max_connections = 4096;                    // open connections in all
  int64_t max_connections_per_user = 1024;           // per authenticated uid
  std::optional<uid_t> unlimited_uid = 0;            // not capped per uid (root: the plugin of every job)
  int64_t max_unauthenticated_per_address = 256;     // connections from one address before their first message
  int64_t max_unauthenticated_bytes = 16 << 20;      // frame bodies being read, not yet authenticated
  std::chrono::milliseconds frame_timeout{10'000};   // a started frame's body; a new connection's first frame
};

// Descriptors elasticd keeps for itself beside its connections: the state database, the log,
// munge, Slurm's RPCs, Asio's own.
inline constexpr int64_t kReservedDescriptors = 64;

// The most connections the open-file limit (RLIMIT_NOFILE, soft) leaves room for.
int64_t ConnectionsTheDescriptorsAllow();

// Empty when the descriptors allow `max_connections`; otherwise a warning that says how many
// connections elasticd can serve and what to change.
std::string DescriptorShortfall(int64_t max_connections);

// The counts behind the limits. Not thread-safe: the server's one thread owns it.
class ConnectionLimits {
 public:
  explicit ConnectionLimits(ServerLimits limits = {}) : limits_(std::move(limits)) {}

  // New limits apply to what comes next; connections already counted stay.
  void SetLimits(ServerLimits limits) { limits_ = std::move(limits); }
  const ServerLimits& limits() const { return limits_; }

  // A new connection from `address`: counted (in all, and as unauthenticated from its address)
  // when the caps allow it; otherwise nothing is counted and the refusal names the limit.
  Status Admit(const std::string& address);
  // The connection's messages are from `uid` now (`previous`: the uid it was counted under, none
  // while unauthenticated). On a refusal (uid's cap) the connection stays counted as it was.
  Status Authenticate(const std::string& address, std::optional<uid_t> previous, uid_t uid);
  // The connection closed; `uid` as last authenticated (none: counted under its address).
  void Leave(const std::string& address, std::optional<uid_t> uid);

  // Reserves `bytes` of the unauthenticated budget for a frame's body, or refuses.
  Status ReserveBody(uint32_t bytes);
  void ReleaseBody(uint32_t bytes);

  int64_t open() const { return open_; }
  int64_t unauthenticated_bytes() const { return body_bytes_; }
  int64_t unauthenticated_from(const std::string& address) const;
  int64_t of_user(uid_t uid) const;

 private:
  ServerLimits limits_;
  int64_t open_ = 0;
  int64_t body_bytes_ = 0;
  std::map<std::string, int64_t> unauthenticated_;  // by peer address
  std::map<uid_t, int64_t> users_;
};

}  // namespace elastic::controller
