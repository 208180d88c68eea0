// The join record and token check of docs/interfaces.md section 6.
//
// Right after MPI_Comm_connect/MPI_Comm_accept, the joining group's rank 0 sends a fixed 64-byte
// record to the parent's rank 0:
//   bytes  0..7   magic "ELJOIN01"
//   bytes  8..11  group id, unsigned 32-bit big-endian
//   bytes 12..15  zero
//   bytes 16..47  token: 32 lowercase hex digits (ASCII)
//   bytes 48..63  zero
// The parent compares the whole record with the one it expects, in constant time.
// A release record (magic "ELRELS01", the group id, no token) comes from the parent's own
// stand-in (elastic-join-release) that frees an accept no joiner came to: the join is abandoned.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "elastic/common/error.h"

namespace elastic::mpi {

using JoinRecord = std::array<std::uint8_t, 64>;
// The MPI tags of the record (joiner -> parent) and of the verdict (parent -> joiner).
inline constexpr int kTagJoinRecord = 7301;
inline constexpr int kTagJoinVerdict = 7302;

// True for exactly 32 lowercase hex digits (the job contract's form of a token:
// common/include/elastic/common/join_token.h).
bool IsValidToken(std::string_view token) noexcept;
// The record for (group, token); kInvalidArgument when the token is not valid.
Result<JoinRecord> EncodeJoinRecord(std::uint32_t group, std::string_view token);
// Compares two records in time independent of where they differ.
bool RecordsEqual(const JoinRecord& a, const JoinRecord& b) noexcept;
// The release record for group (see above), and whether a record is one.
JoinRecord ReleaseRecord(std::uint32_t group) noexcept;
bool IsReleaseRecord(const JoinRecord& record) noexcept;
// The MPI service name under which a parent publishes its port for group: elastic.<job>.<group>.
std::string JoinServiceName(std::string_view job_id, std::uint32_t group);

}  // namespace elastic::mpi
