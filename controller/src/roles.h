// Who may administer elasticd, decided in one place and the way slurmctld decides it: root and
// the SlurmUser are administrators; any other user has the AdminLevel that slurmdbd records for
// them (`sacctmgr modify user NAME set adminlevel=Operator`). Handlers state the role they need
// and call Roles::Require, whose refusal names that role.
//
// The facts come from Slurm through RoleSources (the SlurmAdapter in elasticd) and are cached per
// uid for `cache_s` seconds, so that a burst of requests asks slurmdbd once. A source that cannot
// be read never grants anything: the request is refused, and the refusal says what could not be
// read. Single-threaded, like the controller.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "elastic/common/error.h"
#include "slurm_adapter.h"

namespace elastic::controller {

// Ordered: a role includes the ones below it.
enum class Role { kUser, kOperator, kAdministrator };

// "a plain user", "an operator", "an administrator".
std::string_view RoleName(Role role);
// Who holds `needed`, for refusals: "a Slurm operator or administrator (AdminLevel=Operator or
// Administrator in sacctmgr), root or SlurmUser".
std::string NeededText(Role needed);

// The facts the decision needs. Each returns kUnavailable (or another error) when it cannot tell.
struct RoleSources {
  std::function<Result<uint32_t>()> slurm_user;                            // SlurmUser's uid
  std::function<Result<AdminLevel>(const std::string& user)> admin_level;  // slurmdbd's AdminLevel
  std::function<Result<bool>()> private_jobs;  // slurm.conf's PrivateData includes `jobs`
};

// The facts as elasticd's SlurmAdapter reads them (slurmctld, slurmdbd); `slurm` must outlive the
// sources. nullptr: no sources (tests without Slurm): only root is then an administrator.
RoleSources SlurmRoleSources(SlurmAdapter* slurm);

// The outcome of one decision.
struct RoleCheck {
  Role role = Role::kUser;
  std::string who;      // "user 'elastic' (uid 1001)", or "uid 4242" without a user name
  std::string basis;    // why: "root", "SlurmUser", "AdminLevel=Operator", "no user name", ...
  std::string unknown;  // not empty: a fact could not be read, so the role may be higher than `role`
};

// The decision itself, without caching or lookups: root and SlurmUser are administrators,
// everyone else has their AdminLevel. `slurm_user` and `level` are the facts as far as known
// (an error: not known). Exposed for tests.
RoleCheck DecideRole(uid_t uid, const std::optional<std::string>& name, const Result<uint32_t>& slurm_user,
                     const std::optional<Result<AdminLevel>>& level);

// Which elastic jobs a caller sees in `status`, as slurmctld shows jobs: every job, unless
// slurm.conf's PrivateData includes `jobs`; then root, the SlurmUser, operators and
// administrators (the callers who administer elasticd) still see every job, and anyone else only
// their own. A PrivateData that cannot be read counts as including `jobs`, and a role that cannot
// be told as a plain user's: what cannot be read never shows more.
struct JobVisibility {
  bool all = true;
  std::string why;  // when not all: why the caller sees only their own jobs
};

// The decision itself, without lookups: `private_jobs` as far as known (an error: not known) and
// the caller's role (consulted only when the jobs are private). Exposed for tests.
JobVisibility DecideJobVisibility(const Result<bool>& private_jobs, const RoleCheck& caller);

class Roles {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic

  // `cache_s`: how long an answer about a uid is reused (0: never). A failed lookup is retried
  // after at most kRetryS.
  Roles(RoleSources sources, double cache_s, Clock clock = {});

  void SetCacheSeconds(double cache_s) { cache_s_ = cache_s; }

  // The role of `uid`. Looks up only what it needs: nothing for root, SlurmUser for others, and
  // slurmdbd only when the uid is not the SlurmUser. Never throws.
  RoleCheck Check(uid_t uid);

  // Returns the check when `uid` holds `needed`; otherwise throws elastic::Error(kPermission)
  // with "<action> needs <NeededText>; <who> is <role>" (or what could not be read).
  RoleCheck Require(uid_t uid, Role needed, std::string_view action);

  // root or the SlurmUser (Slurm's own daemons' identities): no slurmdbd lookup.
  bool IsRootOrSlurmUser(uid_t uid);

  // Which jobs `uid` sees in status (DecideJobVisibility). Looks up the caller's role only when
  // PrivateData includes `jobs` (or cannot be read); PrivateData is cached like SlurmUser.
  JobVisibility Visibility(uid_t uid);

  // A failed lookup is not cached longer than this; and after a lookup of an AdminLevel failed,
  // slurmdbd is not asked again, for any uid, for this long: a lookup that cannot reach slurmdbd
  // may block elasticd's one thread, so repeated requests (by anyone) cannot stall it.
  static constexpr double kRetryS = 5;

 private:
  struct Entry {
    RoleCheck check;
    double expires = 0;
  };
  Result<uint32_t> SlurmUser();
  Result<bool> PrivateJobs();

  RoleSources sources_;
  double cache_s_;
  Clock clock_;
  std::map<uid_t, Entry> cache_;
  std::optional<uint32_t> slurm_user_;
  double slurm_user_expires_ = 0;
  std::optional<bool> private_jobs_;
  double private_jobs_expires_ = 0;
  double admin_level_down_until_ = 0;  // slurmdbd failed: no lookup before this time
  std::string admin_level_down_why_;
};

// The user name of `uid` (getpwuid_r); nullopt when there is none.
std::optional<std::string> UserName(uid_t uid);

}  // namespace elastic::controller
