#include "spanning_world.h"

#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "private_file.h"

namespace elastic::launch {

namespace {

std::string WorldEndPath(const std::string& run_dir) { return run_dir + "/world.end"; }

}  // namespace

bool OneGroupPerNode(const std::vector<NodeRecord>& records) {
  std::set<std::string> names;
  for (const NodeRecord& r : records) {
    if (r.node.empty() || !names.insert(r.node).second) return false;
  }
  return records.size() > 1;
}

std::string SpanningHosts(const std::vector<NodeRecord>& records) {
  std::string hosts;
  for (const NodeRecord& r : records) hosts += (hosts.empty() ? "" : ",") + r.node + ":" + std::to_string(r.ranks);
  return hosts;
}

std::string SpanningGroupDir(const std::string& run_dir) { return run_dir + "/group.world"; }

bool WriteWorldEnd(const std::string& run_dir, const std::string& uri, int rc) {
  // The status first, then the launch it belongs to (the URI may hold blanks: the rest of the line).
  return WritePrivateFile(WorldEndPath(run_dir), std::to_string(rc) + " " + uri + "\n");
}

std::optional<int> ReadWorldEnd(const std::string& run_dir, const std::string& uri) {
  const std::string line = ReadFirstLine(WorldEndPath(run_dir));
  const std::size_t blank = line.find(' ');
  if (blank == std::string::npos || line.substr(blank + 1) != uri) return std::nullopt;
  int rc = 0;
  std::istringstream in(line.substr(0, blank));
  if (!(in >> rc) || !in.eof()) return std::nullopt;
  return rc;
}

int AwaitWorldEnd(const std::string& run_dir, const std::string& uri, const std::function<void()>& each_poll) {
  for (;;) {
    each_poll();
    if (auto rc = ReadWorldEnd(run_dir, uri)) return *rc;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace elastic::launch
