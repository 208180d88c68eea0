// Slurm accounting as sacct prints it: the authority for GPU-hours.
//
// elastic-report runs
//   sacct --parsable2 --noheader --allusers --duplicates -X --starttime S --endtime E
//         --format=JobIDRaw,User,Account,Partition,AllocTRES,ElapsedRaw,Submit,Eligible,Start,End,State,AdminComment,JobID,JobName
// (JobName last: it is the only field a user chooses freely, so a '|' in it cannot shift the others)
// and reads one record per job allocation. Extension jobs (docs/interfaces.md section 4) are
// recognised by their admin comment "elastic-ext parent=P group=G", which only operators can set
// (the job contract's ExtensionLink, common/include/elastic/common/extension_link.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "elastic/common/error.h"
#include "elastic/common/extension_link.h"

namespace elastic::report {

// The --format list elastic-report passes to sacct, in the order ParseSacct expects.
extern const char* const kSacctFormat;
inline constexpr int kSacctFields = 14;

struct SacctRecord {
  std::string job_id;          // JobIDRaw ("4711"; array and het jobs have their own raw ids)
  std::string display_id;      // JobID as sacct shows it ("4711", an array task "4710_3"; JobIDRaw if empty)
  uint64_t job_number = 0;     // JobIDRaw as a number (0 when it is not a plain number)
  std::string user, account, partition, state, admin_comment, name;
  int64_t gpus = 0;            // gres/gpu of AllocTRES (0: no GPUs, or not allocated yet)
  int64_t elapsed_s = 0;       // ElapsedRaw: run time without suspended time
  double submit = 0, eligible = 0, start = 0, end = 0;  // 0: Unknown/None
  bool extension = false;      // admin comment names a parent
  uint64_t parent = 0;         // the parent's job id (extensions)
  int64_t group = 0;           // the extension's group id
  bool named_extension = false;  // job name starts with "elastic-ext:" (not proof of anything)
};

// Parses sacct's output (the fields of kSacctFormat, '|'-separated, one record per line; empty
// lines are skipped). Fails with kProtocol on the first malformed line with a message of the form
//   "sacct output line N: ..." (and "(job ID)" once the id is known).
Result<std::vector<SacctRecord>> ParseSacct(std::string_view text);

// The gres/gpu count of a TRES string ("billing=2,cpu=2,gres/gpu:a100=4,gres/gpu=4,node=2" -> 4).
// Typed entries (gres/gpu:TYPE) are parts of the total and are not added. Missing: 0.
Result<int64_t> GpusOfTres(std::string_view tres);

// Parses "elastic-ext parent=P group=G" exactly; nullopt for anything else.
using contract::ExtensionLink;
inline std::optional<ExtensionLink> ParseExtensionComment(std::string_view comment) {
  return ExtensionLink::ParseAdminComment(comment);
}

// Runs `sacct_path` with the arguments above for [since, until] (SLURM_CONF and the rest of the
// environment are inherited; SLURM_TIME_FORMAT is set to "standard" so that times parse) and
// returns its standard output. kUnavailable when it cannot be started or exits non-zero, with
// sacct's own error text.
Result<std::string> RunSacct(const std::string& sacct_path, double since, double until);

// The argument vector RunSacct executes (argv[0] is sacct_path); for --verbose and tests.
std::vector<std::string> SacctCommand(const std::string& sacct_path, double since, double until);

}  // namespace elastic::report
