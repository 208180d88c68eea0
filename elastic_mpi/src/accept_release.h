// The release of an accept no joiner comes to (internal header). MPI_Comm_accept cannot be
// cancelled; after `after_s` rank 0 of the accepting world starts elastic-join-release, a
// separate MPI singleton that connects to the port through the job's rendezvous and sends a
// release record (launch/join_release.cpp says why a separate process). The accept then
// returns, the parent refuses the stand-in and abandons the join.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace elastic::mpi::detail {

class AcceptRelease {
 public:
  // uri_file: the job's ompi-server URI file (ELASTIC_RENDEZVOUS_URI); empty: no release possible
  // (logged when the deadline passes).
  AcceptRelease(std::string port, std::uint32_t group, std::string uri_file, double after_s);
  // Cancels the timer; a stand-in still running (the real joiner came first) is killed.
  ~AcceptRelease();
  AcceptRelease(const AcceptRelease&) = delete;
  AcceptRelease& operator=(const AcceptRelease&) = delete;
  // Whether the stand-in was started (then a release record is expected).
  bool fired();

 private:
  void Fire();

  std::string port_;
  std::uint32_t group_;
  std::string uri_file_;
  double after_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool fired_ = false;
  pid_t child_ = -1;
  std::thread thread_;
};

// The path of elastic-join-release: next to the library's bin directory (<prefix>/lib/.. /bin,
// also the build tree's layout), else beside this program, else found on PATH.
std::string JoinReleaseProgram();

}  // namespace elastic::mpi::detail
