#include "elastic/common/join_token.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

namespace elastic::contract {

Result<std::string> NewJoinToken() {
  unsigned char bytes[kJoinTokenLength / 2];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status(ErrorKind::kInternal, std::string("getrandom failed: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  token.reserve(kJoinTokenLength);
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

bool IsValidJoinToken(std::string_view token) noexcept {
  if (token.size() != kJoinTokenLength) return false;
  for (char c : token) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace elastic::contract
