// The Google Benchmark adapter: how a run reports that it failed differs between the releases the
// project builds with. Google Benchmark 1.7 (Debian 12) has Run::error_occurred and
// Run::error_message; 1.8 and later (Debian 13: 1.9) have Run::skipped (SkippedWithError for a
// failed run) and Run::skip_message. No version macro tells them apart, so each function asks the
// type for its members (templates: the branch not taken is never compiled).
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <type_traits>

namespace elastic::bench {

template <class Run>
bool RunFailed(const Run& r) {
  if constexpr (requires { r.error_occurred; }) {
    return r.error_occurred;
  } else {
    // Named through the member's type, so that the name depends on Run (1.7 has no such enum).
    using Skipped = std::remove_cvref_t<decltype(r.skipped)>;
    return r.skipped == Skipped::SkippedWithError;
  }
}

template <class Run>
std::string RunError(const Run& r) {
  if constexpr (requires { r.error_message; }) {
    return r.error_message;
  } else {
    return r.skip_message;
  }
}

}  // namespace elastic::bench
