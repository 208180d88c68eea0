// Small files in the job's private run dir, shared by the launchers of one job (rendezvous URI,
// initial token, torchrun's node records).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace elastic::launch {

// Writes text to path with mode 600 (temp file + rename, so readers never see half of it).
inline bool WritePrivateFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok && std::rename(tmp.c_str(), path.c_str()) == 0;
}

// The file's first line ("" when there is none).
inline std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace elastic::launch
