// Fused sweeps: fusion profiles and a sweep's (GPUs, trials per GPU) choices (fusion.h).
#include "elastic/optimizer/fusion.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

namespace elastic::optimizer {
namespace {

Status Bad(const std::string& what) { return Status(ErrorKind::kInvalidArgument, what); }

bool SpeedupOk(int w, double s) { return std::isfinite(s) && s > 0.0 && s <= static_cast<double>(w) + 1e-12; }

}  // namespace

Status ValidateFusionProfile(const FusionProfile& p) {
  const std::string who = "fusion profile '" + p.name + "'";
  if (p.speedup.empty()) return Bad(who + ": no widths");
  if (p.speedup[0] != 1.0) return Bad(who + ": width 1 must have speedup 1 (a trial alone), got " + std::to_string(p.speedup[0]));
  for (int w = 1; w <= p.max_width(); ++w) {
    if (!SpeedupOk(w, p.Speedup(w))) {
      return Bad(who + ": width " + std::to_string(w) + " has speedup " + std::to_string(p.Speedup(w)) +
                 "; expected a number in (0, " + std::to_string(w) + "]");
    }
  }
  return Status::Ok();
}

Result<FusionProfile> ProfileFromPoints(std::string name, const std::vector<std::pair<int, double>>& points) {
  if (points.empty()) return Bad("fusion profile '" + name + "': no points (expected W:SPEEDUP,...)");
  std::vector<std::pair<int, double>> pts{{1, 1.0}};
  for (const auto& [w, s] : points) {
    if (w < 1 || w <= pts.back().first) {
      if (w == 1 && pts.size() == 1 && s == 1.0) continue;  // an explicit 1:1 is allowed
      return Bad("fusion profile '" + name + "': widths must be >= 2 and increasing, got " + std::to_string(w) +
                 " after " + std::to_string(pts.back().first));
    }
    if (!SpeedupOk(w, s)) {
      return Bad("fusion profile '" + name + "': width " + std::to_string(w) + " has speedup " + std::to_string(s) +
                 "; expected a number in (0, " + std::to_string(w) + "]");
    }
    pts.emplace_back(w, s);
  }
  FusionProfile p;
  p.name = std::move(name);
  p.speedup.push_back(1.0);
  for (size_t i = 1; i < pts.size(); ++i) {
    const auto [w0, s0] = pts[i - 1];
    const auto [w1, s1] = pts[i];
    for (int w = w0 + 1; w <= w1; ++w) p.speedup.push_back(s0 + (s1 - s0) * (w - w0) / static_cast<double>(w1 - w0));
  }
  return p;
}

Result<FusionProfile> BuiltinFusionProfile(std::string_view name) {
  // docs/results.md, python.bench_fused on the quiet machine, fused vs separate processes.
  if (name == "cpu-mlp") return ProfileFromPoints("cpu-mlp", {{2, 0.86}, {4, 1.38}, {8, 1.77}, {16, 2.39}});
  if (name == "cpu-cnn") return ProfileFromPoints("cpu-cnn", {{2, 1.08}, {4, 1.27}, {8, 1.52}, {16, 1.39}});
  return Status(ErrorKind::kNotFound,
                "unknown fusion profile '" + std::string(name) + "' (known: " + BuiltinFusionProfileNames() + ")");
}

std::string BuiltinFusionProfileNames() { return "cpu-mlp, cpu-cnn"; }

Result<FusionProfile> ParseFusionProfile(std::string_view text) {
  if (text.find(':') == std::string_view::npos) return BuiltinFusionProfile(text);
  std::vector<std::pair<int, double>> points;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, end - pos);
    const size_t colon = item.find(':');
    int w = 0;
    double s = 0.0;
    const auto rw = colon == std::string_view::npos ? std::from_chars_result{item.data(), std::errc::invalid_argument}
                                                    : std::from_chars(item.data(), item.data() + colon, w);
    const auto rs = colon == std::string_view::npos
                        ? rw
                        : std::from_chars(item.data() + colon + 1, item.data() + item.size(), s);
    if (rw.ec != std::errc() || rw.ptr != item.data() + colon || rs.ec != std::errc() ||
        rs.ptr != item.data() + item.size()) {
      return Bad("fusion profile: expected W:SPEEDUP items separated by commas (e.g. 2:1.9,4:3.5,8:6), got '" +
                 std::string(item) + "'");
    }
    points.emplace_back(w, s);
    pos = end + 1;
  }
  return ProfileFromPoints(std::string(text), points);
}

std::vector<FusedChoice> SweepChoices(const FusionProfile& profile, int trials, int max_gpus, int max_width) {
  std::vector<FusedChoice> out;
  const int W = max_width > 0 ? std::min(max_width, profile.max_width()) : profile.max_width();
  const int R = trials;
  const int G = std::min(trials, max_gpus);
  if (R < 1 || G < 1 || W < 1) return out;
  // f[g][n]: the best throughput of exactly g GPUs carrying exactly n trials, 1..W each;
  // k[g][n]: the trials of the g-th GPU in it.
  const double none = -std::numeric_limits<double>::infinity();
  const size_t cols = static_cast<size_t>(R) + 1;
  std::vector<double> f((static_cast<size_t>(G) + 1) * cols, none);
  std::vector<int> k(f.size(), 0);
  auto at = [&](int g, int n) { return static_cast<size_t>(g) * cols + static_cast<size_t>(n); };
  f[at(0, 0)] = 0.0;
  for (int g = 1; g <= G; ++g) {
    for (int n = g; n <= std::min(R, g * W); ++n) {
      for (int w = 1; w <= std::min(W, n); ++w) {
        const double prev = f[at(g - 1, n - w)];
        if (prev == none) continue;
        const double v = prev + profile.Speedup(w);
        if (v > f[at(g, n)]) {
          f[at(g, n)] = v;
          k[at(g, n)] = w;
        }
      }
    }
  }
  for (int g = 1; g <= G; ++g) {
    int best_n = -1;
    for (int n = g; n <= std::min(R, g * W); ++n) {
      if (f[at(g, n)] != none && (best_n < 0 || f[at(g, n)] > f[at(g, best_n)])) best_n = n;
    }
    if (best_n < 0) continue;
    FusedChoice c;
    c.gpus = g;
    c.trials = best_n;
    c.throughput = f[at(g, best_n)];
    for (int gg = g, n = best_n; gg > 0; --gg) {
      const int w = k[at(gg, n)];
      c.per_gpu.push_back(w);
      n -= w;
    }
    std::sort(c.per_gpu.rbegin(), c.per_gpu.rend());
    c.width = c.per_gpu.front();
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Option> SweepOptions(const std::vector<FusedChoice>& choices, const std::string& gpu_type) {
  std::vector<Option> out;
  out.reserve(choices.size());
  for (const FusedChoice& c : choices) out.push_back(Option{gpu_type, c.gpus, 0, c.throughput});
  return out;
}

const FusedChoice* FusedChoiceFor(const std::vector<FusedChoice>& choices, int gpus) {
  for (const FusedChoice& c : choices) {
    if (c.gpus == gpus) return &c;
  }
  return nullptr;
}

}  // namespace elastic::optimizer
