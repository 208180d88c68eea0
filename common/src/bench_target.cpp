#include "elastic/common/bench_target.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace elastic::bench {

std::string_view BoundText(Bound bound) noexcept {
  switch (bound) {
    case Bound::kBelow: return "<";
    case Bound::kAtMost: return "<=";
    case Bound::kAtLeast: return ">=";
    case Bound::kAbove: return ">";
  }
  return "?";
}

Result<double> TightenFactor() {
  const char* text = std::getenv(kTightenVariable);
  if (text == nullptr || *text == '\0') return 1.0;
  char* end = nullptr;
  const double factor = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(factor) || factor < 1.0) {
    return Status(ErrorKind::kInvalidArgument,
                  std::string(kTightenVariable) + "='" + text +
                      "' is not a number >= 1 (it tightens every target by that factor; unset it for the "
                      "stated targets)");
  }
  return factor;
}

TargetCheck Check(std::string name, double measured, Bound bound, double stated, double factor) {
  TargetCheck c;
  c.name = std::move(name);
  c.measured = measured;
  c.bound = bound;
  c.stated = stated;
  const bool upper = bound == Bound::kBelow || bound == Bound::kAtMost;
  c.limit = upper ? stated / factor : stated * factor;
  if (std::isnan(measured)) {
    c.met = false;
  } else {
    switch (bound) {
      case Bound::kBelow: c.met = measured < c.limit; break;
      case Bound::kAtMost: c.met = measured <= c.limit; break;
      case Bound::kAtLeast: c.met = measured >= c.limit; break;
      case Bound::kAbove: c.met = measured > c.limit; break;
    }
  }
  return c;
}

nlohmann::json ToJson(const TargetCheck& c) {
  return {{"name", c.name},
          {"measured", std::isnan(c.measured) ? nlohmann::json(nullptr) : nlohmann::json(c.measured)},
          {"bound", std::string(BoundText(c.bound))},
          {"stated", c.stated},
          {"limit", c.limit},
          {"met", c.met}};
}

void AddChecks(nlohmann::json& line, const std::vector<TargetCheck>& checks, double factor) {
  nlohmann::json targets = nlohmann::json::array();
  bool met = true;
  for (const TargetCheck& c : checks) {
    targets.push_back(ToJson(c));
    met = met && c.met;
  }
  line["targets"] = std::move(targets);
  line["met"] = met;
  if (factor != 1.0) line["tighten"] = factor;
}

std::string Missed(const std::vector<TargetCheck>& checks) {
  std::string out;
  for (const TargetCheck& c : checks) {
    if (c.met) continue;
    char figure[64];
    char limit[64];
    if (std::isnan(c.measured)) {
      std::snprintf(figure, sizeof figure, "not measured");
    } else {
      std::snprintf(figure, sizeof figure, "%.6g", c.measured);
    }
    std::snprintf(limit, sizeof limit, "%.6g", c.limit);
    out += (out.empty() ? "" : "; ") + c.name + " " + figure + " (target " + std::string(BoundText(c.bound)) + " " +
           limit + ")";
  }
  return out;
}

}  // namespace elastic::bench
