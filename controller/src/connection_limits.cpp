#include "connection_limits.h"

#include <sys/resource.h>

#include <limits>

namespace elastic::controller {
namespace {

Status Busy(std::string message) { return Status(ErrorKind::kUnavailable, std::move(message)); }

std::string Connections(int64_t n) { return std::to_string(n) + (n == 1 ? " connection" : " connections"); }

void Decrement(std::map<std::string, int64_t>& counts, const std::string& key) {
  auto it = counts.find(key);
  if (it != counts.end() && --it->second <= 0) counts.erase(it);
}

}  // namespace

int64_t ConnectionsTheDescriptorsAllow() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return std::numeric_limits<int64_t>::max();
  int64_t soft = rl.rlim_cur > static_cast<rlim_t>(std::numeric_limits<int64_t>::max())
                     ? std::numeric_limits<int64_t>::max()
                     : static_cast<int64_t>(rl.rlim_cur);
  return soft > kReservedDescriptors ? soft - kReservedDescriptors : 0;
}

std::string DescriptorShortfall(int64_t max_connections) {
  int64_t allowed = ConnectionsTheDescriptorsAllow();
  if (max_connections <= allowed) return "";
  return "controller.max_connections is " + std::to_string(max_connections) + " but the open-file limit (" +
         std::to_string(allowed + kReservedDescriptors) + ", RLIMIT_NOFILE) leaves room for " + std::to_string(allowed) +
         " connections; elasticd refuses connections beyond that: raise LimitNOFILE in elasticd's unit "
         "(or ulimit -n) or lower controller.max_connections";
}

Status ConnectionLimits::Admit(const std::string& address) {
  if (open_ >= limits_.max_connections) {
    return Busy("elasticd has " + Connections(open_) + " open, its limit (controller.max_connections " +
                std::to_string(limits_.max_connections) + "); retry later");
  }
  int64_t& from = unauthenticated_[address];
  if (from >= limits_.max_unauthenticated_per_address) {
    int64_t n = from;
    if (n == 0) unauthenticated_.erase(address);
    return Busy(address + " has " + Connections(n) +
                " to elasticd that have not sent a message yet, the limit "
                "(controller.max_unauthenticated_per_address " +
                std::to_string(limits_.max_unauthenticated_per_address) + "); retry later");
  }
  ++from;
  ++open_;
  return Status::Ok();
}

Status ConnectionLimits::Authenticate(const std::string& address, std::optional<uid_t> previous, uid_t uid) {
  if (previous == uid) return Status::Ok();
  if (limits_.unlimited_uid != uid) {
    auto it = users_.find(uid);
    int64_t n = it == users_.end() ? 0 : it->second;
    if (n >= limits_.max_connections_per_user) {
      return Busy("uid " + std::to_string(uid) + " has " + Connections(n) +
                  " to elasticd open, the limit (controller.max_connections_per_user " +
                  std::to_string(limits_.max_connections_per_user) +
                  "); every running elastic job's runtime holds one: close others or ask the centre to raise it");
    }
  }
  if (previous) {
    auto it = users_.find(*previous);
    if (it != users_.end() && --it->second <= 0) users_.erase(it);
  } else {
    Decrement(unauthenticated_, address);
  }
  ++users_[uid];
  return Status::Ok();
}

void ConnectionLimits::Leave(const std::string& address, std::optional<uid_t> uid) {
  if (uid) {
    auto it = users_.find(*uid);
    if (it != users_.end() && --it->second <= 0) users_.erase(it);
  } else {
    Decrement(unauthenticated_, address);
  }
  if (open_ > 0) --open_;
}

Status ConnectionLimits::ReserveBody(uint32_t bytes) {
  if (body_bytes_ + static_cast<int64_t>(bytes) > limits_.max_unauthenticated_bytes) {
    return Busy("elasticd is reading " + std::to_string(body_bytes_) +
                " bytes of requests not yet authenticated; a frame of " + std::to_string(bytes) +
                " more would pass the limit (controller.max_unauthenticated_mib, " +
                std::to_string(limits_.max_unauthenticated_bytes) + " bytes); retry later");
  }
  body_bytes_ += bytes;
  return Status::Ok();
}

void ConnectionLimits::ReleaseBody(uint32_t bytes) {
  body_bytes_ = body_bytes_ >= static_cast<int64_t>(bytes) ? body_bytes_ - bytes : 0;
}

int64_t ConnectionLimits::unauthenticated_from(const std::string& address) const {
  auto it = unauthenticated_.find(address);
  return it == unauthenticated_.end() ? 0 : it->second;
}

int64_t ConnectionLimits::of_user(uid_t uid) const {
  auto it = users_.find(uid);
  return it == users_.end() ? 0 : it->second;
}

}  // namespace elastic::controller
