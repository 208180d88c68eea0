// Error taxonomy shared by every component (docs/errors.md explains each kind).
//
// Functions that can fail in expected ways (bad user input, an unreachable peer) return
// Status or Result<T>; broken invariants throw elastic::Error with kind kInternal.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <optional>

namespace elastic {

enum class ErrorKind {
  kInvalidArgument,  // the caller's input is wrong: fix the input
  kConfig,           // a configuration file or plugin argument is wrong: fix the site config
  kUnavailable,      // a peer or daemon cannot be reached now: retry or degrade
  kPermission,       // the caller is not allowed to do this
  kNotFound,         // the named object does not exist
  kTimeout,          // an operation did not finish in its time limit
  kProtocol,         // a peer sent a malformed or unsupported message
  kInternal,         // a broken invariant: a bug
};

// Short stable name of an error kind ("invalid-argument", ...), used in logs and wire replies.
std::string_view ErrorKindName(ErrorKind kind) noexcept;

// Exception type for errors that cross a component boundary as exceptions.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// The outcome of an operation: ok, or an error kind with a message for a human.
class Status {
 public:
  Status() = default;  // ok
  Status(ErrorKind kind, std::string message) : ok_(false), kind_(kind), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const noexcept { return ok_; }
  ErrorKind kind() const noexcept { return kind_; }
  const std::string& message() const noexcept { return message_; }
  // "invalid-argument: <message>", or "ok".
  std::string ToString() const;
  // Throws elastic::Error when not ok.
  void ThrowIfError() const;

 private:
  bool ok_ = true;
  ErrorKind kind_ = ErrorKind::kInternal;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (status_.ok()) throw Error(ErrorKind::kInternal, "Result built from an ok Status");
  }
  bool ok() const noexcept { return value_.has_value(); }
  const Status& status() const noexcept { return status_; }
  // The value; throws elastic::Error with the status when there is none.
  T& value() & {
    status_.ThrowIfError();
    return *value_;
  }
  const T& value() const& {
    status_.ThrowIfError();
    return *value_;
  }
  T&& value() && {
    status_.ThrowIfError();
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace elastic
