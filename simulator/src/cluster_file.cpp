#include "elastic/simulator/cluster_file.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace elastic::simulator {
namespace {

bool ParsePositive(const std::string& s, int& out) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end && out >= 1;
}

bool ValidName(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace

int ClusterSpec::TotalGpus() const noexcept {
  int n = 0;
  for (const ClusterType& t : types) n += t.capacity();
  return n;
}

int ClusterSpec::TypeIndex(const std::string& name) const noexcept {
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

const std::vector<std::string>& KnownProfiles() {
  static const std::vector<std::string> k = {"aws", "azure", "dgx", "dgx-ext", "quad", "rtx"};
  return k;
}

Result<ClusterSpec> ParseClusterFile(const std::string& text, const std::string& path) {
  ClusterSpec spec;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  auto fail = [&](const std::string& msg) {
    return Status(ErrorKind::kInvalidArgument, path + ":" + std::to_string(lineno) + ": " + msg);
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty()) continue;
    if (f.size() != 4) {
      return fail("expected 4 fields 'NAME NODES GPUS_PER_NODE PROFILE', got " + std::to_string(f.size()));
    }
    ClusterType t;
    t.name = f[0];
    if (!ValidName(t.name)) return fail("GPU type name '" + t.name + "': use letters, digits, '-', '_' or '.'");
    if (spec.TypeIndex(t.name) >= 0) return fail("GPU type '" + t.name + "' is listed twice");
    if (!ParsePositive(f[1], t.nodes)) return fail("NODES: expected a whole number >= 1, got '" + f[1] + "'");
    if (!ParsePositive(f[2], t.gpus_per_node) || t.gpus_per_node > 9) {
      return fail("GPUS_PER_NODE: expected a whole number from 1 to 9, got '" + f[2] + "'");
    }
    t.profile = f[3];
    const auto& known = KnownProfiles();
    if (std::find(known.begin(), known.end(), t.profile) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      return fail("unknown profile '" + t.profile + "' (known: " + list + ")");
    }
    spec.types.push_back(std::move(t));
  }
  if (spec.types.empty()) {
    return Status(ErrorKind::kInvalidArgument, path + ": no GPU type (one line per type: NAME NODES GPUS_PER_NODE PROFILE)");
  }
  return spec;
}

Result<ClusterSpec> ReadClusterFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status(ErrorKind::kNotFound, path + ": cannot read the cluster file");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ParseClusterFile(ss.str(), path);
}

}  // namespace elastic::simulator
