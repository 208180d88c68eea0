// A state database file of elasticd for a controller's test: a new empty file in /tmp, deleted
// with the object (a file, not memory, so that the test can read what elasticd wrote while the
// controller has it open), and a controller without Slurm on it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "controller.h"
#include "db.h"

namespace elastic::controller {

class StateFile {
 public:
  StateFile() { Create(); }
  ~StateFile() { std::remove(path_.c_str()); }
  // Deletes the file and starts a new empty one (path() names it).
  void Renew() {
    std::remove(path_.c_str());
    Create();
  }
  StateFile(const StateFile&) = delete;
  StateFile& operator=(const StateFile&) = delete;
  const std::string& path() const { return path_; }
  // A controller on this file, without Slurm; rescales not spaced (min_rescale_interval 0).
  std::unique_ptr<Controller> OpenController(ControllerConfig cfg) const {
    cfg.min_rescale_interval_s = 0;
    auto db = Database::Open(path_);
    EXPECT_TRUE(db.ok());
    return std::make_unique<Controller>(cfg, std::move(db).value(), nullptr);
  }

 private:
  void Create() {
    char tmpl[] = "/tmp/elastic-controller-test-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    EXPECT_GE(fd, 0) << "mkstemp in /tmp";
    if (fd >= 0) ::close(fd);
    path_ = tmpl;
  }
  std::string path_;
};

}  // namespace elastic::controller
