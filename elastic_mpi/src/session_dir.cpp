#include "session_dir.h"

#include <ftw.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>

namespace elastic::mpi::stack {

std::string NewSessionDir(const char* prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr && *tmp == '/' ? tmp : "/tmp") + "/" + prefix + ".XXXXXX";
  return mkdtemp(dir.data()) != nullptr ? dir : std::string();
}

void RemoveSessionDir(const std::string& dir) {
  if (dir.empty()) return;
  nftw(dir.c_str(), [](const char* path, const struct stat*, int, struct FTW*) { return std::remove(path); }, 16,
       FTW_DEPTH | FTW_PHYS);
}

}  // namespace elastic::mpi::stack
