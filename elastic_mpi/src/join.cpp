#include "elastic_mpi/join.h"

#include <cstring>

#include "elastic/common/join_token.h"

namespace elastic::mpi {

bool IsValidToken(std::string_view token) noexcept { return contract::IsValidJoinToken(token); }

namespace {
JoinRecord Header(const char (&magic)[9], std::uint32_t group) noexcept {
  JoinRecord record{};
  std::memcpy(record.data(), magic, 8);
  record[8] = static_cast<std::uint8_t>(group >> 24);
  record[9] = static_cast<std::uint8_t>(group >> 16);
  record[10] = static_cast<std::uint8_t>(group >> 8);
  record[11] = static_cast<std::uint8_t>(group);
  return record;
}
}  // namespace

Result<JoinRecord> EncodeJoinRecord(std::uint32_t group, std::string_view token) {
  if (!IsValidToken(token)) {
    return Status(ErrorKind::kInvalidArgument,
                  "join token must be 32 lowercase hex digits (got " +
                      std::to_string(token.size()) + " characters)");
  }
  JoinRecord record = Header("ELJOIN01", group);
  std::memcpy(record.data() + 16, token.data(), 32);
  return record;
}

JoinRecord ReleaseRecord(std::uint32_t group) noexcept { return Header("ELRELS01", group); }

bool IsReleaseRecord(const JoinRecord& record) noexcept { return std::memcmp(record.data(), "ELRELS01", 8) == 0; }

bool RecordsEqual(const JoinRecord& a, const JoinRecord& b) noexcept {
  // Accumulate every difference; volatile keeps the compiler from stopping early.
  volatile std::uint8_t diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = static_cast<std::uint8_t>(diff | (a[i] ^ b[i]));
  }
  return diff == 0;
}

std::string JoinServiceName(std::string_view job_id, std::uint32_t group) {
  return "elastic." + std::string(job_id) + "." + std::to_string(group);
}

}  // namespace elastic::mpi
