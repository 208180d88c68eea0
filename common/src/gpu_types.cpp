#include "elastic/common/gpu_types.h"

#include <algorithm>

namespace elastic::contract {
namespace {

Status Bad(std::string message) { return Status(ErrorKind::kInvalidArgument, std::move(message)); }

// Quotes user text for a message; control characters never reach a terminal or a log.
std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 40)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (s.size() > 40) out += "...";
  return out + "'";
}

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

}  // namespace

std::string JoinGpuTypes(const std::vector<std::string>& types) {
  std::string out;
  for (const auto& t : types) out += (out.empty() ? "" : ",") + t;
  return out;
}

Result<std::vector<std::string>> ParseGpuTypes(std::string_view text, const std::vector<std::string>& known,
                                               std::string_view flag) {
  const std::string f(flag);
  if (text.empty()) return Bad(f + ": empty list; give the GPU types the job may run on, e.g. " + f + "=a100,v100");
  std::vector<std::string> types;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) {
      return Bad(f + ": " + Quote(text) + " has an empty item; separate the types by single commas, e.g. a100,v100");
    }
    if (item.size() > kMaxGpuTypeLength || !std::all_of(item.begin(), item.end(), NameChar)) {
      return Bad(f + ": " + Quote(item) + " is not a GPU type name (letters, digits, '.', '-' and '_', at most " +
                 std::to_string(kMaxGpuTypeLength) + " characters)");
    }
    if (std::find(types.begin(), types.end(), item) != types.end()) {
      return Bad(f + ": " + Quote(item) + " is listed twice; give each type once");
    }
    if (!known.empty() && std::find(known.begin(), known.end(), item) == known.end()) {
      return Bad(f + ": this cluster has no GPU type " + Quote(item) + "; its types are " + JoinGpuTypes(known));
    }
    types.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return types;
}

Status CheckOwnGpuType(const std::vector<std::string>& types, const std::string& job_type, std::string_view flag) {
  if (types.empty()) return Status::Ok();
  const std::string f(flag);
  if (job_type.empty()) {
    return Bad(f + "=" + JoinGpuTypes(types) + " needs a typed GPU request on one of these types, e.g. --gres=gpu:" +
               types.front() + ":N (the job's GPUs are untyped or of several types)");
  }
  if (std::find(types.begin(), types.end(), job_type) == types.end()) {
    return Bad(f + "=" + JoinGpuTypes(types) + " does not contain " + Quote(job_type) +
               ", the type of the job's own GPU request (--gres=gpu:" + job_type + ":N): add it to the list or request "
               "GPUs of a listed type");
  }
  return Status::Ok();
}

}  // namespace elastic::contract
