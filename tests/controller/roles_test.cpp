// Who administers elasticd (controller/src/roles.h), without daemons: the decision table, the
// refusal messages, the cache, and the handlers that declare the role they need. The sources of
// facts are functions here; the slurm test test_admin_roles.py reads them from the real
// slurmctld and slurmdbd.
#include <gtest/gtest.h>
#include <pwd.h>

#include <string>
#include <vector>

#include "controller.h"
#include "db.h"
#include "db_records.h"
#include "roles.h"

namespace elastic::controller {
namespace {

constexpr uint32_t kSlurmUser = 64030;
const Status kDbdDown(ErrorKind::kUnavailable, "slurmdbd did not answer: Connection refused");

// A real account with a user name other than root: "nobody" exists on every Debian system.
uid_t NobodyUid() {
  passwd* pw = getpwnam("nobody");
  if (pw == nullptr) throw std::runtime_error("this test needs the user 'nobody'");
  return pw->pw_uid;
}

// An uid without a user name.
uid_t NamelessUid() {
  for (uid_t uid = 4242420; uid < 4242520; ++uid) {
    if (!UserName(uid)) return uid;
  }
  throw std::runtime_error("no free uid found");
}

struct DecisionCase {
  const char* name;
  uid_t uid;
  bool has_name;
  Result<uint32_t> slurm_user;
  std::optional<Result<AdminLevel>> level;
  Role role;
  const char* basis;
  bool unknown;
};

TEST(RolesTest, DecisionTable) {
  const uid_t u = 1001;
  const std::vector<DecisionCase> cases{
      {"root", 0, true, Result<uint32_t>(kSlurmUser), std::nullopt, Role::kAdministrator, "root", false},
      {"root with Slurm down", 0, true, Result<uint32_t>(kDbdDown), std::nullopt, Role::kAdministrator, "root", false},
      {"SlurmUser", kSlurmUser, true, Result<uint32_t>(kSlurmUser), std::nullopt, Role::kAdministrator, "SlurmUser",
       false},
      {"SlurmUser with AdminLevel None", kSlurmUser, true, Result<uint32_t>(kSlurmUser), AdminLevel::kNone,
       Role::kAdministrator, "SlurmUser", false},
      {"AdminLevel None", u, true, Result<uint32_t>(kSlurmUser), AdminLevel::kNone, Role::kUser, "AdminLevel=None",
       false},
      {"AdminLevel Operator", u, true, Result<uint32_t>(kSlurmUser), AdminLevel::kOperator, Role::kOperator,
       "AdminLevel=Operator", false},
      {"AdminLevel Administrator", u, true, Result<uint32_t>(kSlurmUser), AdminLevel::kAdministrator,
       Role::kAdministrator, "AdminLevel=Administrator", false},
      {"slurmdbd down: never granted", u, true, Result<uint32_t>(kSlurmUser), Result<AdminLevel>(kDbdDown),
       Role::kUser, "AdminLevel unknown", true},
      {"slurmctld down, operator anyway", u, true, Result<uint32_t>(kDbdDown), AdminLevel::kOperator,
       Role::kOperator, "AdminLevel=Operator", true},
      {"no user name", u, false, Result<uint32_t>(kSlurmUser), std::nullopt, Role::kUser, "no user name", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    RoleCheck r = DecideRole(c.uid, c.has_name ? std::optional<std::string>("someone") : std::nullopt, c.slurm_user,
                             c.level);
    EXPECT_EQ(r.role, c.role);
    EXPECT_EQ(r.basis, c.basis);
    EXPECT_EQ(!r.unknown.empty(), c.unknown) << r.unknown;
  }
}

// Counts the lookups; the facts can be changed between calls.
struct FakeSlurm {
  Result<uint32_t> slurm_user = kSlurmUser;
  Result<AdminLevel> level = AdminLevel::kNone;
  Result<bool> private_jobs = false;
  int slurm_user_calls = 0;
  int level_calls = 0;
  int private_calls = 0;
  std::vector<std::string> asked;
  double now = 1000;

  Roles Make(double cache_s) {
    return Roles(RoleSources{[this] {
                               ++slurm_user_calls;
                               return slurm_user;
                             },
                             [this](const std::string& user) {
                               ++level_calls;
                               asked.push_back(user);
                               return level;
                             },
                             [this] {
                               ++private_calls;
                               return private_jobs;
                             }},
                 cache_s, [this] { return now; });
  }
};

std::string Refusal(Roles& roles, uid_t uid, Role needed, const char* action) {
  try {
    roles.Require(uid, needed, action);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPermission);
    return e.what();
  }
  return "granted";
}

TEST(RolesTest, RefusalsNameTheRoleNeeded) {
  FakeSlurm slurm;
  Roles roles = slurm.Make(0);
  const uid_t nobody = NobodyUid();
  const std::string who = "user 'nobody' (uid " + std::to_string(nobody) + ")";
  EXPECT_EQ(Refusal(roles, nobody, Role::kOperator, "plan"),
            "plan needs a Slurm operator or administrator (AdminLevel=Operator or Administrator in sacctmgr), root or "
            "SlurmUser; " + who + " is a plain user");
  EXPECT_EQ(slurm.asked, std::vector<std::string>{"nobody"});  // slurmdbd is asked by user name

  slurm.level = AdminLevel::kOperator;
  EXPECT_EQ(Refusal(roles, nobody, Role::kOperator, "plan"), "granted");
  EXPECT_EQ(Refusal(roles, nobody, Role::kAdministrator, "drain"),
            "drain needs a Slurm administrator (AdminLevel=Administrator in sacctmgr), root or SlurmUser; " + who +
                " is an operator");
  slurm.level = AdminLevel::kAdministrator;
  EXPECT_EQ(Refusal(roles, nobody, Role::kAdministrator, "drain"), "granted");

  slurm.level = Status(kDbdDown);
  EXPECT_EQ(Refusal(roles, nobody, Role::kOperator, "set_policy"),
            "set_policy needs a Slurm operator or administrator (AdminLevel=Operator or Administrator in sacctmgr), "
            "root or SlurmUser; cannot tell whether " + who +
                " is one (cannot read its AdminLevel: " + kDbdDown.message() + ")");

  const uid_t nameless = NamelessUid();
  EXPECT_EQ(Refusal(roles, nameless, Role::kOperator, "snapshot"),
            "snapshot needs a Slurm operator or administrator (AdminLevel=Operator or Administrator in sacctmgr), "
            "root or SlurmUser; uid " + std::to_string(nameless) + " (no user name) is a plain user");

  // The SlurmUser is an administrator whatever slurmdbd says (the uid need not have a name).
  slurm.slurm_user = static_cast<uint32_t>(nameless);
  EXPECT_EQ(Refusal(roles, nameless, Role::kAdministrator, "drain"), "granted");
  EXPECT_TRUE(roles.IsRootOrSlurmUser(nameless));
  EXPECT_FALSE(roles.IsRootOrSlurmUser(nobody));
}

TEST(RolesTest, RootAsksNobody) {
  FakeSlurm slurm;
  slurm.slurm_user = Status(kDbdDown);
  slurm.level = Status(kDbdDown);
  Roles roles = slurm.Make(60);
  EXPECT_EQ(roles.Require(0, Role::kAdministrator, "anything").basis, "root");
  EXPECT_TRUE(roles.IsRootOrSlurmUser(0));
  EXPECT_EQ(slurm.slurm_user_calls + slurm.level_calls, 0);
}

TEST(RolesTest, AnswersAreCachedPerUidForTheConfiguredTime) {
  FakeSlurm slurm;
  Roles roles = slurm.Make(60);
  const uid_t nobody = NobodyUid();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(roles.Check(nobody).role, Role::kUser);  // a burst
  EXPECT_EQ(slurm.level_calls, 1);
  EXPECT_EQ(slurm.slurm_user_calls, 1);

  // Granted in slurmdbd: seen once the cached answer is 60 s old, not before.
  slurm.level = AdminLevel::kOperator;
  slurm.now += 59.5;
  EXPECT_EQ(roles.Check(nobody).role, Role::kUser);
  slurm.now += 1;
  EXPECT_EQ(roles.Check(nobody).role, Role::kOperator);
  EXPECT_EQ(slurm.level_calls, 2);

  // A failed lookup refuses, and is retried after kRetryS, not after the full cache time.
  slurm.level = Status(kDbdDown);
  slurm.now += 61;
  EXPECT_EQ(roles.Check(nobody).role, Role::kUser);
  EXPECT_FALSE(roles.Check(nobody).unknown.empty());
  EXPECT_EQ(slurm.level_calls, 3);
  // Nor is slurmdbd asked for anybody else meanwhile (a lookup that cannot reach it may block
  // elasticd): uid 1 is 'daemon' on Debian.
  ASSERT_TRUE(UserName(1).has_value());
  RoleCheck other = roles.Check(1);
  EXPECT_EQ(other.role, Role::kUser);
  EXPECT_NE(other.unknown.find("not asked again yet"), std::string::npos) << other.unknown;
  EXPECT_EQ(slurm.level_calls, 3);
  slurm.level = AdminLevel::kOperator;
  slurm.now += Roles::kRetryS + 0.1;
  EXPECT_EQ(roles.Check(nobody).role, Role::kOperator);
  EXPECT_EQ(slurm.level_calls, 4);

  // Revoked, with no cache (admin_cache = 0, and after a reload that sets it): asked every time.
  roles.SetCacheSeconds(0);
  slurm.level = AdminLevel::kNone;
  slurm.now += 61;
  EXPECT_EQ(roles.Check(nobody).role, Role::kUser);
  EXPECT_EQ(roles.Check(nobody).role, Role::kUser);
  EXPECT_EQ(slurm.level_calls, 6);
}

TEST(RolesTest, JobVisibilityFollowsPrivateData) {
  const Status ctld_down(ErrorKind::kUnavailable, "slurmctld did not answer: Connection refused");
  auto caller = [](Role role, const char* who, const std::string& unknown = "") {
    RoleCheck c;
    c.role = role;
    c.who = who;
    c.unknown = unknown;
    return c;
  };
  struct Case {
    const char* name;
    Result<bool> private_jobs;
    RoleCheck caller;
    bool all;
    const char* why;
  };
  const std::vector<Case> cases{
      {"not private: a plain user sees all", false, caller(Role::kUser, "user 'alice' (uid 1001)"), true, ""},
      {"private: a plain user sees the own jobs", true, caller(Role::kUser, "user 'alice' (uid 1001)"), false,
       "Slurm's PrivateData includes jobs and user 'alice' (uid 1001) is a plain user: only that user's own jobs are "
       "shown"},
      {"private: an operator sees all", true, caller(Role::kOperator, "user 'op' (uid 1002)"), true, ""},
      {"private: an administrator (root, SlurmUser, AdminLevel) sees all", true,
       caller(Role::kAdministrator, "user 'slurm' (uid 64030)"), true, ""},
      {"private, AdminLevel unknown: the own jobs", true,
       caller(Role::kUser, "user 'op' (uid 1002)", "cannot read its AdminLevel: down"), false,
       "Slurm's PrivateData includes jobs and user 'op' (uid 1002) is a plain user as far as known (cannot read its "
       "AdminLevel: down): only that user's own jobs are shown"},
      {"PrivateData unknown: the own jobs", Result<bool>(ctld_down), caller(Role::kUser, "uid 4242"), false,
       "Slurm's PrivateData could not be read (slurmctld did not answer: Connection refused) and uid 4242 is a plain "
       "user: only that user's own jobs are shown"},
      {"PrivateData unknown: an operator sees all", Result<bool>(ctld_down), caller(Role::kOperator, "user 'op'"), true,
       ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const JobVisibility v = DecideJobVisibility(c.private_jobs, c.caller);
    EXPECT_EQ(v.all, c.all);
    EXPECT_EQ(v.why, c.why);
  }

  // Through Roles: the role is looked up only when the jobs are private; PrivateData is cached.
  FakeSlurm slurm;
  Roles roles = slurm.Make(60);
  const uid_t nobody = NobodyUid();
  EXPECT_TRUE(roles.Visibility(nobody).all);
  EXPECT_EQ(slurm.level_calls, 0) << "no AdminLevel lookup while jobs are not private";
  slurm.private_jobs = true;
  EXPECT_TRUE(roles.Visibility(nobody).all) << "PrivateData is cached";
  slurm.now += 61;
  EXPECT_FALSE(roles.Visibility(nobody).all);
  EXPECT_EQ(slurm.private_calls, 2);
  EXPECT_EQ(slurm.level_calls, 1);
  EXPECT_TRUE(roles.Visibility(0).all) << "root";
  slurm.slurm_user = static_cast<uint32_t>(nobody);  // the SlurmUser sees all
  slurm.now += 61;
  EXPECT_TRUE(roles.Visibility(nobody).all);
}

// status shows a plain user only the own jobs while PrivateData is not known to be off (here:
// no slurmctld at all), and root every job; the reply says why.
TEST(RolesTest, StatusShowsAPlainUserTheOwnJobsOnly) {
  auto db = Database::Open(":memory:");
  ASSERT_TRUE(db.ok());
  const uid_t nobody = NobodyUid();
  for (uint32_t id : {101u, 102u}) {
    ElasticJob job;
    job.id = id;
    job.uid = id == 101 ? nobody : 4242;
    job.user = id == 101 ? "nobody" : "someone";
    job.base_gpus = 1;
    records::SeedRunningJob(*db.value(), job.ToJson());
  }
  Controller ctl(ControllerConfig{}, std::move(db).value(), nullptr);
  auto ids = [](const nlohmann::json& reply) {
    std::vector<uint32_t> out;
    for (const auto& j : reply["jobs"]) out.push_back(j["job_id"]);
    return out;
  };
  nlohmann::json mine = ctl.Handle(nobody, {{"v", 1}, {"type", "status"}, {"id", 1}});
  ASSERT_TRUE(mine["ok"].get<bool>()) << mine;
  EXPECT_EQ(ids(mine), std::vector<uint32_t>{101});
  EXPECT_NE(mine.value("only_own_jobs", "").find("PrivateData could not be read"), std::string::npos) << mine;
  nlohmann::json all = ctl.Handle(0, {{"v", 1}, {"type", "status"}, {"id", 2}});
  EXPECT_EQ(ids(all), (std::vector<uint32_t>{101, 102}));
  EXPECT_FALSE(all.contains("only_own_jobs"));
}

// The handlers declare the role they need: without Slurm (no adapter) only root administers,
// and a plain account is refused with a message that names the role and what could not be read.
TEST(RolesTest, AdministrativeMessagesNeedAnOperator) {
  auto db = Database::Open(":memory:");
  ASSERT_TRUE(db.ok());
  Controller ctl(ControllerConfig{}, std::move(db).value(), nullptr);
  const uid_t nobody = NobodyUid();
  for (const char* type : {"plan", "snapshot", "pause_all", "resume_all", "set_policy"}) {
    SCOPED_TRACE(type);
    nlohmann::json reply = ctl.Handle(nobody, {{"v", 1}, {"type", type}, {"id", 7}, {"policy", "greedy"}});
    ASSERT_FALSE(reply["ok"].get<bool>()) << reply;
    EXPECT_EQ(reply["error"]["kind"], "permission");
    EXPECT_EQ(reply["error"]["message"],
              std::string(type) +
                  " needs a Slurm operator or administrator (AdminLevel=Operator or Administrator in sacctmgr), root "
                  "or SlurmUser; cannot tell whether user 'nobody' (uid " + std::to_string(nobody) +
                  ") is one (cannot read SlurmUser: no connection to slurmctld; cannot read its AdminLevel: no "
                  "connection to slurmdbd)");
  }
  nlohmann::json reply = ctl.Handle(0, {{"v", 1}, {"type", "set_policy"}, {"id", 8}, {"policy", "greedy"}});
  EXPECT_TRUE(reply["ok"].get<bool>()) << reply;
  EXPECT_EQ(ctl.config().policy, "greedy");
  reply = ctl.Handle(0, {{"v", 1}, {"type", "pause_all"}, {"id", 9}});
  EXPECT_TRUE(reply["ok"].get<bool>()) << reply;
}

}  // namespace
}  // namespace elastic::controller
