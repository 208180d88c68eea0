// Benchmark targets: a benchmark checks each figure it promises against its stated target, prints
// the checks with its JSON line and exits 1 naming every missed target (docs/results.md,
// "Benchmark targets", lists them all).
//
// ELASTIC_BENCH_TIGHTEN=F (a number >= 1; unset: 1) tightens every target by F, to prove that a
// benchmark fails when it misses: limits of the "<" and "<=" kind are divided by F, those of the
// ">" and ">=" kind multiplied. It can only make a target harder; F < 1 is refused.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "elastic/common/error.h"

namespace elastic::bench {

inline constexpr const char* kTightenVariable = "ELASTIC_BENCH_TIGHTEN";

// How the measured figure must compare with the limit.
enum class Bound { kBelow, kAtMost, kAtLeast, kAbove };  // <, <=, >=, >

// "<", "<=", ">=", ">".
std::string_view BoundText(Bound bound) noexcept;

// ELASTIC_BENCH_TIGHTEN's factor: 1 when unset or empty; an invalid-argument Status naming the
// variable when it is not a finite number >= 1.
Result<double> TightenFactor();

struct TargetCheck {
  std::string name;     // the figure checked, as it is named in the JSON line ("total_ms_max")
  double measured = 0;  // NaN: not measured, which misses the target
  Bound bound = Bound::kAtMost;
  double stated = 0;    // the target as docs/results.md states it
  double limit = 0;     // the target applied: stated, tightened by the factor
  bool met = false;
};

// Checks measured against the stated target, tightened by factor (>= 1).
TargetCheck Check(std::string name, double measured, Bound bound, double stated, double factor);

// {"name", "measured" (null when NaN), "bound", "stated", "limit", "met"}.
nlohmann::json ToJson(const TargetCheck& check);

// Adds "targets" (every check) and "met" (all met) to a benchmark's JSON line, and "tighten"
// when factor != 1.
void AddChecks(nlohmann::json& line, const std::vector<TargetCheck>& checks, double factor);

// The missed checks in one line, "" when every one was met:
// "total_ms_max 1234.5 (target < 1000); ratio 1.8 (target <= 1.2)".
std::string Missed(const std::vector<TargetCheck>& checks);

}  // namespace elastic::bench
