// The link between an extension job and the elastic job it extends (docs/interfaces.md section 4).
//
// elasticd submits each extension under the job name "elastic-ext:<parent>:<group>" (for people
// and for recovery after a crash; any user can choose that name, so it is never trusted on its
// own) and then sets its admin comment to "elastic-ext parent=<parent> group=<group>" (only
// operators and elasticd can set admin comments, so the comment is the proof). The plugin, elasticd
// and elastic-report all recognise extensions by these two strings, formatted and parsed here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace elastic::contract {

struct ExtensionLink {
  uint64_t parent = 0;  // the parent's Slurm job id, > 0
  int64_t group = 0;    // the extension's group id (elasticd gives ids >= 1; parsing accepts 0)

  // "elastic-ext parent=<parent> group=<group>": the admin comment elasticd sets.
  std::string AdminComment() const;
  // "elastic-ext:<parent>:<group>": the job name elasticd submits the extension under.
  std::string JobName() const;

  // Parses an admin comment exactly: the prefix "elastic-ext parent=", the parent (decimal
  // digits, not 0), one space, "group=", the group (decimal digits), nothing else; at most 18
  // digits each. nullopt for anything else (two spaces, trailing text, a sign, ...).
  static std::optional<ExtensionLink> ParseAdminComment(std::string_view comment);
  // Parses a job name exactly, by the same rules: "elastic-ext:", parent, ':', group, nothing else.
  static std::optional<ExtensionLink> ParseJobName(std::string_view name);

  bool operator==(const ExtensionLink&) const = default;
};

// True when an admin comment starts as an extension's link does ("elastic-ext "): a cheap test
// for "this job is an extension elasticd manages", e.g. to keep such jobs out of the list of
// rigid jobs. Only operators and elasticd set admin comments, so a prefix is enough there;
// ParseAdminComment reads the ids.
bool IsExtensionComment(std::string_view admin_comment) noexcept;
// True when a job name starts as an extension's does ("elastic-ext:"). Not proof of anything:
// any user may choose that name.
bool HasExtensionJobName(std::string_view job_name) noexcept;

}  // namespace elastic::contract
