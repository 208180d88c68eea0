#include "elastic/common/extension_link.h"

namespace elastic::contract {
namespace {

constexpr std::string_view kCommentPrefix = "elastic-ext parent=";
constexpr std::string_view kCommentGroup = " group=";
constexpr std::string_view kNamePrefix = "elastic-ext:";

// 1 to 18 decimal digits, nothing else.
std::optional<uint64_t> ParseDigits(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// "<parent><separator><group>" after the prefix, both in digits, the parent not 0.
std::optional<ExtensionLink> ParseIds(std::string_view rest, std::string_view separator) {
  size_t at = rest.find(separator);
  if (at == std::string_view::npos) return std::nullopt;
  auto parent = ParseDigits(rest.substr(0, at));
  auto group = ParseDigits(rest.substr(at + separator.size()));
  if (!parent || !group || *parent == 0) return std::nullopt;
  return ExtensionLink{*parent, static_cast<int64_t>(*group)};
}

}  // namespace

std::string ExtensionLink::AdminComment() const {
  return std::string(kCommentPrefix) + std::to_string(parent) + std::string(kCommentGroup) + std::to_string(group);
}

std::string ExtensionLink::JobName() const {
  return std::string(kNamePrefix) + std::to_string(parent) + ":" + std::to_string(group);
}

std::optional<ExtensionLink> ExtensionLink::ParseAdminComment(std::string_view comment) {
  if (!comment.starts_with(kCommentPrefix)) return std::nullopt;
  return ParseIds(comment.substr(kCommentPrefix.size()), kCommentGroup);
}

std::optional<ExtensionLink> ExtensionLink::ParseJobName(std::string_view name) {
  if (!name.starts_with(kNamePrefix)) return std::nullopt;
  return ParseIds(name.substr(kNamePrefix.size()), ":");
}

bool IsExtensionComment(std::string_view admin_comment) noexcept { return admin_comment.starts_with("elastic-ext "); }

bool HasExtensionJobName(std::string_view job_name) noexcept { return job_name.starts_with(kNamePrefix); }

}  // namespace elastic::contract
