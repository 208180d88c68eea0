#include "elastic/common/site.h"

#include <glob.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace elastic::config {
namespace {

std::string Trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Searches one plugstack file (following "include" lines) for the elastic.so line.
bool Search(const std::string& path, SiteAddress& out, std::vector<std::string>& read, int depth) {
  if (depth > 8) return false;
  std::ifstream in(path);
  if (!in) return false;
  read.push_back(path);
  std::string line;
  while (std::getline(in, line)) {
    line = Trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "include") {
      std::string pattern;
      words >> pattern;
      glob_t g{};
      if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) {
          if (Search(g.gl_pathv[i], out, read, depth + 1)) {
            globfree(&g);
            return true;
          }
        }
      }
      globfree(&g);
      continue;
    }
    if (kind != "required" && kind != "optional") continue;
    std::string plugin;
    words >> plugin;
    if (plugin.size() < 10 || plugin.compare(plugin.size() - 10, 10, "elastic.so") != 0) continue;
    std::string arg;
    bool found = false;
    while (words >> arg) {
      if (arg.rfind("controller=", 0) == 0) {
        auto hp = ParseHostPort(arg.substr(11), "controller");
        if (hp.ok()) {
          out.controller = hp.value();
          found = true;
        }
      } else if (arg.rfind("munge_socket=", 0) == 0) {
        out.munge_socket = arg.substr(13);
      }
    }
    if (found) {
      out.plugstack = path;
      return true;
    }
  }
  return false;
}

}  // namespace

Result<SiteAddress> FindSiteAddress(const std::string& slurm_conf) {
  std::string conf = slurm_conf;
  if (conf.empty()) {
    const char* env = std::getenv("SLURM_CONF");
    conf = env && *env ? env : "/etc/slurm/slurm.conf";
  }
  std::string plugstack;
  {
    std::ifstream in(conf);
    if (!in) return Status(ErrorKind::kNotFound, "cannot read " + conf + " (set SLURM_CONF or use --controller)");
    std::string line;
    while (std::getline(in, line)) {
      line = Trim(line.substr(0, line.find('#')));
      auto eq = line.find('=');
      if (eq != std::string::npos && Lower(Trim(line.substr(0, eq))) == "plugstackconfig") plugstack = Trim(line.substr(eq + 1));
    }
  }
  if (plugstack.empty()) plugstack = conf.substr(0, conf.rfind('/') + 1) + "plugstack.conf";
  SiteAddress out;
  std::vector<std::string> read;
  if (Search(plugstack, out, read, 0)) return out;
  std::string files;
  for (const auto& f : read) files += (files.empty() ? "" : ", ") + f;
  return Status(ErrorKind::kNotFound, "no elastic.so line with controller=HOST:PORT in " +
                                          (files.empty() ? plugstack + " (unreadable)" : files) +
                                          " (use --controller HOST:PORT)");
}

}  // namespace elastic::config
