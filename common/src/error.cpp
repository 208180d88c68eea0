#include "elastic/common/error.h"

namespace elastic {

std::string_view ErrorKindName(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid-argument";
    case ErrorKind::kConfig: return "config";
    case ErrorKind::kUnavailable: return "unavailable";
    case ErrorKind::kPermission: return "permission";
    case ErrorKind::kNotFound: return "not-found";
    case ErrorKind::kTimeout: return "timeout";
    case ErrorKind::kProtocol: return "protocol";
    case ErrorKind::kInternal: return "internal";
  }
  return "internal";
}

std::string Status::ToString() const {
  if (ok_) return "ok";
  std::string s(ErrorKindName(kind_));
  s += ": ";
  s += message_;
  return s;
}

void Status::ThrowIfError() const {
  if (!ok_) throw Error(kind_, message_);
}

}  // namespace elastic
