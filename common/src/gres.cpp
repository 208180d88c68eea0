#include "elastic/common/gres.h"

#include <algorithm>
#include <cstdlib>

namespace elastic::slurm_text {

namespace {

// Calls `item` for every comma-separated item of `text` (empty items included).
template <typename F>
void ForEachItem(const std::string& text, F item) {
  size_t start = 0;
  while (start < text.size()) {
    const size_t comma = text.find(',', start);
    item(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}

// The running type: the first one named, "mixed" once another appears.
void AddType(std::string& type, const std::string& t) { type = type.empty() || type == t ? t : "mixed"; }

// A job's request string as GRES items: "gres:gpu:v100:2;gres/shard=1" -> "gpu:v100:2,shard:1"
// (items split at ',' or ';', "gres:" and "gres/" prefixes gone, '=' before a count, and a GPU
// item without a count counts 1, as Slurm reads --gres=gpu:v100: "gpu:v100" -> "gpu:v100:1").
std::string AsGresItems(std::string text) {
  std::replace(text.begin(), text.end(), ';', ',');
  for (const char* prefix : {"gres:", "gres/"}) {
    for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix)) text.erase(at, 5);
  }
  std::replace(text.begin(), text.end(), '=', ':');  // "gpu:v100=1" -> "gpu:v100:1"
  std::string out;
  ForEachItem(text, [&](const std::string& item) {
    out += (out.empty() ? "" : ",") + item;
    const std::string last = item.substr(item.rfind(':') + 1);  // the whole item when it has no ':'
    const bool counted = !last.empty() && std::all_of(last.begin(), last.end(), [](char c) { return c >= '0' && c <= '9'; });
    if ((item == "gpu" || item.rfind("gpu:", 0) == 0) && !counted) out += ":1";
  });
  return out;
}

}  // namespace

std::pair<std::string, int> ParseGpuGres(const std::string& gres) {
  std::string type;
  int total = 0;
  ForEachItem(gres, [&](std::string item) {
    item = item.substr(0, item.find('('));
    if (item.rfind("gpu:", 0) != 0) return;
    const std::string rest = item.substr(4);
    const auto colon = rest.rfind(':');
    if (colon == std::string::npos) {
      total += std::max(0, std::atoi(rest.c_str()));
      return;
    }
    total += std::max(0, std::atoi(rest.c_str() + colon + 1));
    AddType(type, rest.substr(0, colon));
  });
  return {type, total};
}

std::vector<std::pair<std::string, int>> ParseGpuGresByType(const std::string& gres) {
  std::vector<std::pair<std::string, int>> out;
  ForEachItem(gres, [&](std::string item) {
    item = item.substr(0, item.find('('));
    if (item.rfind("gpu:", 0) != 0) return;
    const std::string rest = item.substr(4);
    const auto colon = rest.rfind(':');
    const std::string type = colon == std::string::npos ? "" : rest.substr(0, colon);
    const int n = std::max(0, std::atoi(colon == std::string::npos ? rest.c_str() : rest.c_str() + colon + 1));
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == type; });
    if (it == out.end()) {
      out.emplace_back(type, n);
    } else {
      it->second += n;
    }
  });
  return out;
}

std::pair<std::string, int> ParseGpuTres(const std::string& tres) {
  std::string type;
  int total = 0;
  ForEachItem(tres, [&](const std::string& item) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) return;
    const std::string key = item.substr(0, eq);
    const int n = std::atoi(item.c_str() + eq + 1);
    if (key == "gres/gpu") {
      total = std::max(0, n);
    } else if (key.rfind("gres/gpu:", 0) == 0 && n > 0) {
      AddType(type, key.substr(9));
    }
  });
  return {type == "mixed" ? "" : type, total};
}

std::string RequestedGpuType(const std::vector<std::string>& tres_per) {
  std::string type;
  for (const std::string& text : tres_per) {
    const std::string t = ParseGpuGres(AsGresItems(text)).first;
    if (!t.empty()) AddType(type, t);
  }
  return type;
}

int RequestedGpusPerNode(const std::string& tres_per_node) {
  return ParseGpuGres(AsGresItems(tres_per_node)).second;
}

std::pair<std::string, int> RunningJobGpus(const std::string& tres_alloc, const std::string& gres_total,
                                           const std::string& tres_per_node, uint32_t nodes) {
  auto gpus = ParseGpuTres(tres_alloc);
  if (gpus.second > 0) return gpus;
  gpus = ParseGpuGres(gres_total);
  if (gpus.second == 0) {
    gpus = ParseGpuGres(AsGresItems(tres_per_node));
    gpus.second *= static_cast<int>(std::max<uint32_t>(1, nodes));
  }
  if (gpus.first == "mixed") gpus.first.clear();
  return gpus;
}

}  // namespace elastic::slurm_text
