#include "elastic/common/gres.h"

#include <algorithm>
#include <cstdlib>

namespace elastic::slurm_text {

std::pair<std::string, int> ParseGpuGres(const std::string& gres) {
  std::string type;
  int total = 0;
  size_t start = 0;
  while (start < gres.size()) {
    size_t comma = gres.find(',', start);
    std::string item = gres.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    item = item.substr(0, item.find('('));
    if (item.rfind("gpu:", 0) == 0) {
      std::string rest = item.substr(4);
      auto colon = rest.rfind(':');
      int n = 0;
      std::string t;
      if (colon == std::string::npos) {
        n = std::atoi(rest.c_str());
      } else {
        t = rest.substr(0, colon);
        n = std::atoi(rest.c_str() + colon + 1);
      }
      total += std::max(0, n);
      if (!t.empty()) type = type.empty() || type == t ? t : "mixed";
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return {type, total};
}

std::pair<std::string, int> ParseGpuTres(const std::string& tres) {
  std::string type;
  int total = 0;
  size_t start = 0;
  while (start < tres.size()) {
    size_t comma = tres.find(',', start);
    std::string item = tres.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto eq = item.find('=');
    if (eq != std::string::npos) {
      std::string key = item.substr(0, eq);
      int n = std::atoi(item.c_str() + eq + 1);
      if (key == "gres/gpu") {
        total = std::max(0, n);
      } else if (key.rfind("gres/gpu:", 0) == 0 && n > 0) {
        std::string t = key.substr(9);
        type = type.empty() || type == t ? t : "mixed";
      }
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return {type == "mixed" ? "" : type, total};
}

std::pair<std::string, int> RunningJobGpus(const std::string& tres_alloc, const std::string& gres_total,
                                           const std::string& tres_per_node, uint32_t nodes) {
  auto gpus = ParseGpuTres(tres_alloc);
  if (gpus.second > 0) return gpus;
  gpus = ParseGpuGres(gres_total);
  if (gpus.second == 0) {
    std::string per_node = tres_per_node;
    for (size_t at = per_node.find("gres:"); at != std::string::npos; at = per_node.find("gres:")) {
      per_node.erase(at, 5);  // "gres:gpu:a100:2" -> "gpu:a100:2"
    }
    gpus = ParseGpuGres(per_node);
    gpus.second *= static_cast<int>(std::max<uint32_t>(1, nodes));
  }
  if (gpus.first == "mixed") gpus.first.clear();
  return gpus;
}

}  // namespace elastic::slurm_text
