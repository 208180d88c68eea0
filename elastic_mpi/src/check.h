// One check macro per failure source (internal header; not installed).
//
//   ELASTIC_MPI_CHECK(call)      MPI: the error class and string, as Status kUnavailable
//   ELASTIC_CUDA_CHECK(call)     CUDA runtime: cudaGetErrorString (backend_nccl.cpp only)
//   ELASTIC_SYS_CHECK(call)      system calls returning -1 with errno; retried on EINTR
//
// Each returns the failure as a Status from the enclosing function (which must return Status or
// Result<T>). The _GOTO variants keep the first error in a Status variable and jump to a cleanup
// label, for functions that must release resources on every path.
#pragma once

#include <mpi.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "elastic/common/error.h"

namespace elastic::mpi::detail {

// "MPI_Comm_spawn failed: MPI_ERR_SPAWN: ..." for an MPI return code. A process failure (Open MPI
// 5 with fault tolerance on reports it as MPI_ERR_PROC_FAILED; Open MPI 4 has no such class) says
// what it means for the job in the same words on every stack.
inline Status MpiStatus(int rc, const char* what) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::string message = std::string(what) + " failed: " + text;
#ifdef MPI_ERR_PROC_FAILED
  int error_class = MPI_SUCCESS;
  if (MPI_Error_class(rc, &error_class) == MPI_SUCCESS && error_class == MPI_ERR_PROC_FAILED) {
    message += " (a rank of the world died)";
  }
#endif
  return Status(ErrorKind::kUnavailable, message);
}

inline Status SysStatus(int err, const char* what) {
  return Status(ErrorKind::kUnavailable, std::string(what) + " failed: " + std::strerror(err));
}

}  // namespace elastic::mpi::detail

#define ELASTIC_MPI_CHECK(call)                                              \
  do {                                                                       \
    const int elastic_rc_ = (call);                                          \
    if (elastic_rc_ != MPI_SUCCESS) {                                        \
      return ::elastic::mpi::detail::MpiStatus(elastic_rc_, #call);          \
    }                                                                        \
  } while (0)

#define ELASTIC_MPI_CHECK_GOTO(call, status_var, label)                      \
  do {                                                                       \
    const int elastic_rc_ = (call);                                          \
    if (elastic_rc_ != MPI_SUCCESS && (status_var).ok()) {                   \
      (status_var) = ::elastic::mpi::detail::MpiStatus(elastic_rc_, #call);  \
      goto label;                                                            \
    }                                                                        \
  } while (0)

#define ELASTIC_SYS_CHECK(call)                                              \
  do {                                                                       \
    long elastic_rc_;                                                        \
    do {                                                                     \
      elastic_rc_ = static_cast<long>(call);                                 \
    } while (elastic_rc_ == -1 && errno == EINTR);                           \
    if (elastic_rc_ == -1) {                                                 \
      return ::elastic::mpi::detail::SysStatus(errno, #call);                \
    }                                                                        \
  } while (0)

#define ELASTIC_SYS_CHECK_GOTO(call, status_var, label)                      \
  do {                                                                       \
    long elastic_rc_;                                                        \
    do {                                                                     \
      elastic_rc_ = static_cast<long>(call);                                 \
    } while (elastic_rc_ == -1 && errno == EINTR);                           \
    if (elastic_rc_ == -1 && (status_var).ok()) {                            \
      (status_var) = ::elastic::mpi::detail::SysStatus(errno, #call);        \
      goto label;                                                            \
    }                                                                        \
  } while (0)

// Broken invariant: throws elastic::Error(kInternal) naming both values.
#define ELASTIC_ASSERT_EQ(a, b)                                                              \
  do {                                                                                       \
    const auto elastic_a_ = (a);                                                             \
    const auto elastic_b_ = (b);                                                             \
    if (!(elastic_a_ == elastic_b_)) {                                                       \
      throw ::elastic::Error(::elastic::ErrorKind::kInternal,                                \
                             std::string("invariant " #a " == " #b " broken: ") +           \
                                 std::to_string(elastic_a_) + " != " +                       \
                                 std::to_string(elastic_b_));                                \
    }                                                                                        \
  } while (0)
