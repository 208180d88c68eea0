// Rank 0's link to elasticd (docs/interfaces.md, section 3): poll for commands, acknowledge
// them, report metrics and readiness. Best effort by design: the controller being slow or
// away never stops training; each call has a short deadline, and after a failure the link
// waits a while before it tries to reconnect.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "elastic/common/config.h"
#include "elastic/common/error.h"
#include "elastic/common/wire.h"

namespace elastic::mpi {

class ControllerLink {
 public:
  // `address` "HOST:PORT"; `job` the elastic job's Slurm id. kConfig when either is malformed.
  static Result<std::unique_ptr<ControllerLink>> Create(const std::string& address, const std::string& job,
                                                         const std::string& munge_socket);

  // One request; fills "job". The reply, or the reason there is none (the link backs off after
  // a failure: calls within the back-off fail at once with kUnavailable).
  Result<nlohmann::json> Call(nlohmann::json request, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

  // Pending commands (each with its "command" id); empty on any failure.
  std::vector<nlohmann::json> Poll();
  uint32_t job() const { return job_; }

 private:
  ControllerLink(config::HostPort address, uint32_t job, std::string munge_socket)
      : address_(std::move(address)), job_(job), munge_socket_(std::move(munge_socket)) {}
  config::HostPort address_;
  uint32_t job_;
  std::string munge_socket_;
  std::unique_ptr<wire::Client> client_;
  std::chrono::steady_clock::time_point retry_after_{};
  bool warned_ = false;
};

}  // namespace elastic::mpi
