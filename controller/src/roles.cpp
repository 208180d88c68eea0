#include "roles.h"

#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <vector>

#include "elastic/common/log.h"

namespace elastic::controller {
namespace {

constexpr const char* kComponent = "roles";
constexpr size_t kMaxCachedUids = 1024;  // expired entries are dropped beyond this

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string LevelName(AdminLevel level) {
  switch (level) {
    case AdminLevel::kOperator: return "Operator";
    case AdminLevel::kAdministrator: return "Administrator";
    case AdminLevel::kNone: break;
  }
  return "None";
}

void AddUnknown(std::string& unknown, const std::string& what) { unknown += (unknown.empty() ? "" : "; ") + what; }

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAdministrator: return "an administrator";
    case Role::kOperator: return "an operator";
    case Role::kUser: break;
  }
  return "a plain user";
}

std::string NeededText(Role needed) {
  switch (needed) {
    case Role::kAdministrator:
      return "a Slurm administrator (AdminLevel=Administrator in sacctmgr), root or SlurmUser";
    case Role::kOperator:
      return "a Slurm operator or administrator (AdminLevel=Operator or Administrator in sacctmgr), root or SlurmUser";
    case Role::kUser: break;
  }
  return "any user";
}

std::optional<std::string> UserName(uid_t uid) {
  std::vector<char> buf(4096);
  for (;;) {
    passwd pw{};
    passwd* found = nullptr;
    int rc = getpwuid_r(uid, &pw, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < (1u << 20)) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (rc == EINTR) continue;
    if (rc != 0 || found == nullptr || pw.pw_name == nullptr) return std::nullopt;
    return std::string(pw.pw_name);
  }
}

RoleSources SlurmRoleSources(SlurmAdapter* slurm) {
  if (slurm == nullptr) return {};
  return {[slurm] { return slurm->SlurmUserId(); }, [slurm](const std::string& user) { return slurm->AdminLevelOf(user); },
          [slurm] { return slurm->JobsArePrivate(); }};
}

RoleCheck DecideRole(uid_t uid, const std::optional<std::string>& name, const Result<uint32_t>& slurm_user,
                     const std::optional<Result<AdminLevel>>& level) {
  RoleCheck c;
  c.who = name ? "user '" + *name + "' (uid " + std::to_string(uid) + ")" : "uid " + std::to_string(uid);
  if (uid == 0) {
    c.role = Role::kAdministrator;
    c.basis = "root";
    return c;
  }
  if (slurm_user.ok() && slurm_user.value() == uid) {
    c.role = Role::kAdministrator;
    c.basis = "SlurmUser";
    return c;
  }
  if (!slurm_user.ok()) AddUnknown(c.unknown, "cannot read SlurmUser: " + slurm_user.status().message());
  if (!name) {
    // No user name: slurmdbd cannot know it either (its records are by name).
    c.who += " (no user name)";
    c.basis = "no user name";
    return c;
  }
  if (!level.has_value()) {
    AddUnknown(c.unknown, "its AdminLevel was not looked up");
    c.basis = "AdminLevel unknown";
    return c;
  }
  if (!level->ok()) {
    AddUnknown(c.unknown, "cannot read its AdminLevel: " + level->status().message());
    c.basis = "AdminLevel unknown";
    return c;
  }
  const AdminLevel l = level->value();
  c.role = l == AdminLevel::kAdministrator ? Role::kAdministrator : l == AdminLevel::kOperator ? Role::kOperator : Role::kUser;
  c.basis = "AdminLevel=" + LevelName(l);
  return c;
}

JobVisibility DecideJobVisibility(const Result<bool>& private_jobs, const RoleCheck& caller) {
  if (private_jobs.ok() && !private_jobs.value()) return {};
  if (caller.role >= Role::kOperator) return {};
  JobVisibility v;
  v.all = false;
  v.why = private_jobs.ok() ? "Slurm's PrivateData includes jobs"
                            : "Slurm's PrivateData could not be read (" + private_jobs.status().message() + ")";
  v.why += " and " + caller.who + " is " + std::string(RoleName(caller.role));
  if (!caller.unknown.empty()) v.why += " as far as known (" + caller.unknown + ")";
  v.why += ": only that user's own jobs are shown";
  return v;
}

Roles::Roles(RoleSources sources, double cache_s, Clock clock)
    : sources_(std::move(sources)), cache_s_(cache_s), clock_(clock ? std::move(clock) : Clock(SteadySeconds)) {}

Result<uint32_t> Roles::SlurmUser() {
  const double now = clock_();
  if (slurm_user_ && now < slurm_user_expires_) return *slurm_user_;
  if (!sources_.slurm_user) return Status(ErrorKind::kUnavailable, "no connection to slurmctld");
  Result<uint32_t> r = sources_.slurm_user();
  if (r.ok()) {
    slurm_user_ = r.value();
    slurm_user_expires_ = now + cache_s_;
  }
  return r;
}

Result<bool> Roles::PrivateJobs() {
  const double now = clock_();
  if (private_jobs_ && now < private_jobs_expires_) return *private_jobs_;
  if (!sources_.private_jobs) return Status(ErrorKind::kUnavailable, "no connection to slurmctld");
  Result<bool> r = sources_.private_jobs();
  if (r.ok()) {
    private_jobs_ = r.value();
    private_jobs_expires_ = now + cache_s_;
  } else {
    Log(LogLevel::kWarning, kComponent, "cannot read PrivateData: ", r.status().message(),
        "; status shows plain users only their own jobs");
  }
  return r;
}

JobVisibility Roles::Visibility(uid_t uid) {
  if (uid == 0) return {};
  const Result<bool> private_jobs = PrivateJobs();
  if (private_jobs.ok() && !private_jobs.value()) return {};
  return DecideJobVisibility(private_jobs, Check(uid));
}

bool Roles::IsRootOrSlurmUser(uid_t uid) {
  if (uid == 0) return true;
  Result<uint32_t> su = SlurmUser();
  return su.ok() && su.value() == uid;
}

RoleCheck Roles::Check(uid_t uid) {
  if (uid == 0) return DecideRole(uid, "root", Result<uint32_t>(0u), std::nullopt);
  const double now = clock_();
  if (auto it = cache_.find(uid); it != cache_.end() && now < it->second.expires) return it->second.check;

  Result<uint32_t> slurm_user = SlurmUser();
  std::optional<std::string> name = UserName(uid);
  std::optional<Result<AdminLevel>> level;
  const bool is_slurm_user = slurm_user.ok() && slurm_user.value() == uid;
  if (!is_slurm_user && name) {
    if (!sources_.admin_level) {
      level = Result<AdminLevel>(Status(ErrorKind::kUnavailable, "no connection to slurmdbd"));
    } else if (now < admin_level_down_until_) {
      level = Result<AdminLevel>(Status(ErrorKind::kUnavailable, admin_level_down_why_ + " (less than " +
                                                                     std::to_string(static_cast<int>(kRetryS)) +
                                                                     " s ago; not asked again yet)"));
    } else {
      level = sources_.admin_level(*name);
      if (!level->ok()) {
        admin_level_down_until_ = now + kRetryS;
        admin_level_down_why_ = level->status().message();
      }
    }
  }
  RoleCheck c = DecideRole(uid, name, slurm_user, level);
  if (!c.unknown.empty()) Log(LogLevel::kWarning, kComponent, "role of ", c.who, ": ", c.unknown);
  Log(LogLevel::kDebug, kComponent, c.who, " is ", RoleName(c.role), " (", c.basis, ")");

  if (cache_.size() >= kMaxCachedUids) std::erase_if(cache_, [&](const auto& kv) { return kv.second.expires <= now; });
  const double ttl = c.unknown.empty() ? cache_s_ : std::min(cache_s_, kRetryS);
  if (ttl > 0 && cache_.size() < kMaxCachedUids) cache_[uid] = Entry{c, now + ttl};
  return c;
}

RoleCheck Roles::Require(uid_t uid, Role needed, std::string_view action) {
  RoleCheck c = Check(uid);
  if (c.role >= needed) return c;
  std::string message = std::string(action) + " needs " + NeededText(needed) + "; ";
  if (c.unknown.empty()) {
    message += c.who + " is " + std::string(RoleName(c.role));
  } else {
    message += "cannot tell whether " + c.who + " is one (" + c.unknown + ")";
  }
  throw Error(ErrorKind::kPermission, message);
}

}  // namespace elastic::controller
