// Join tokens (docs/interfaces.md section 6): 128 random bits as 32 lowercase hex digits. elasticd
// makes a job's initial token and each extension group's one-time token; elastic-launch makes the
// initial token of a job that has none from elasticd (a rigid job on several nodes); the runtime
// checks the form before it builds a join record (elastic_mpi/src/join.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "elastic/common/error.h"

namespace elastic::contract {

inline constexpr std::size_t kJoinTokenLength = 32;

// A fresh token from the kernel's random source (getrandom). kInternal when the kernel gives no
// random bytes (no caller can go on without a token: elasticd lets .value() throw).
Result<std::string> NewJoinToken();

// True for exactly 32 lowercase hex digits.
bool IsValidJoinToken(std::string_view token) noexcept;

}  // namespace elastic::contract
