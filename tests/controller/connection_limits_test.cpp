// The counts behind elasticd's connection limits (controller/src/connection_limits.h), their
// keys in elasticd.conf, and the warning when the open-file limit cannot hold max_connections.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "config.h"
#include "connection_limits.h"

namespace elastic::controller {
namespace {

TEST(ConnectionLimits, CountsConnectionsInAllPerAddressAndPerUid) {
  ServerLimits s;
  s.max_connections = 3;
  s.max_unauthenticated_per_address = 2;
  s.max_connections_per_user = 1;
  s.unlimited_uid = 0;
  ConnectionLimits l(s);
  EXPECT_TRUE(l.Admit("10.0.0.1").ok());
  EXPECT_TRUE(l.Admit("10.0.0.1").ok());
  Status third = l.Admit("10.0.0.1");
  EXPECT_EQ(third.kind(), ErrorKind::kUnavailable);
  EXPECT_NE(third.message().find("controller.max_unauthenticated_per_address 2"), std::string::npos);
  EXPECT_EQ(l.open(), 2);
  // Authenticating moves a connection from its address to its uid.
  EXPECT_TRUE(l.Authenticate("10.0.0.1", std::nullopt, 1001).ok());
  EXPECT_EQ(l.unauthenticated_from("10.0.0.1"), 1);
  EXPECT_EQ(l.of_user(1001), 1);
  EXPECT_TRUE(l.Admit("10.0.0.1").ok());
  EXPECT_EQ(l.open(), 3);
  Status full = l.Admit("10.0.0.2");
  EXPECT_NE(full.message().find("controller.max_connections 3"), std::string::npos) << full.message();
  // uid 1001 is at its cap; root is not capped per uid; a refusal changes no count.
  Status over = l.Authenticate("10.0.0.1", std::nullopt, 1001);
  EXPECT_NE(over.message().find("uid 1001 has 1 connection to elasticd open"), std::string::npos) << over.message();
  EXPECT_EQ(l.unauthenticated_from("10.0.0.1"), 2);
  EXPECT_TRUE(l.Authenticate("10.0.0.1", std::nullopt, 0).ok());
  // A later message from another uid moves the connection, within that uid's cap.
  EXPECT_FALSE(l.Authenticate("10.0.0.1", 0, 1001).ok());
  EXPECT_TRUE(l.Authenticate("10.0.0.1", 1001, 1001).ok());
  l.Leave("10.0.0.1", 1001);
  EXPECT_TRUE(l.Authenticate("10.0.0.1", 0, 1001).ok());
  EXPECT_EQ(l.of_user(0), 0);
  l.Leave("10.0.0.1", 1001);
  l.Leave("10.0.0.1", std::nullopt);
  EXPECT_EQ(l.open(), 0);
  EXPECT_EQ(l.unauthenticated_from("10.0.0.1"), 0);
  EXPECT_EQ(l.of_user(1001), 0);
}

TEST(ConnectionLimits, BudgetsUnauthenticatedBytes) {
  ServerLimits s;
  s.max_unauthenticated_bytes = 1000;
  ConnectionLimits l(s);
  EXPECT_TRUE(l.ReserveBody(600).ok());
  EXPECT_TRUE(l.ReserveBody(400).ok());
  Status over = l.ReserveBody(1);
  EXPECT_EQ(over.kind(), ErrorKind::kUnavailable);
  EXPECT_EQ(l.unauthenticated_bytes(), 1000);
  l.ReleaseBody(600);
  EXPECT_TRUE(l.ReserveBody(1).ok());
  EXPECT_EQ(l.unauthenticated_bytes(), 401);
}

TEST(ConnectionLimits, WarnsWhenTheOpenFileLimitCannotHoldMaxConnections) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 512);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  int64_t allowed = ConnectionsTheDescriptorsAllow();
  std::string warning = DescriptorShortfall(4096);
  std::string none = DescriptorShortfall(allowed);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_EQ(allowed, static_cast<int64_t>(low.rlim_cur) - kReservedDescriptors);
  EXPECT_EQ(none, "");
  EXPECT_EQ(warning, "controller.max_connections is 4096 but the open-file limit (" + std::to_string(low.rlim_cur) +
                         ", RLIMIT_NOFILE) leaves room for " + std::to_string(allowed) +
                         " connections; elasticd refuses connections beyond that: raise LimitNOFILE in elasticd's "
                         "unit (or ulimit -n) or lower controller.max_connections");
}

class ConfigFile {
 public:
  explicit ConfigFile(const std::string& text) {
    char tmpl[] = "/tmp/elastic-limits-conf-XXXXXX";
    int fd = ::mkstemp(tmpl);
    if (fd >= 0) ::close(fd);
    path_ = tmpl;
    std::ofstream(path_) << text;
  }
  ~ConfigFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ConnectionLimits, ComeFromTheControllerSection) {
  auto defaults = LoadConfig(ConfigFile("[controller]\n").path());
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_EQ(defaults.value().server.max_connections, 4096);
  EXPECT_EQ(defaults.value().server.max_connections_per_user, 1024);
  EXPECT_EQ(defaults.value().server.max_unauthenticated_per_address, 256);
  EXPECT_EQ(defaults.value().server.max_unauthenticated_bytes, 16 << 20);
  EXPECT_EQ(defaults.value().server.frame_timeout, std::chrono::seconds(10));
  auto set = LoadConfig(ConfigFile("[controller]\nmax_connections = 500\nmax_connections_per_user = 50\n"
                                   "max_unauthenticated_per_address = 20\nmax_unauthenticated_mib = 4\n"
                                   "frame_timeout = 30\n")
                            .path());
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set.value().server.max_connections, 500);
  EXPECT_EQ(set.value().server.max_connections_per_user, 50);
  EXPECT_EQ(set.value().server.max_unauthenticated_per_address, 20);
  EXPECT_EQ(set.value().server.max_unauthenticated_bytes, 4 << 20);
  EXPECT_EQ(set.value().server.frame_timeout, std::chrono::seconds(30));
  auto bad = LoadConfig(ConfigFile("[controller]\nframe_timeout = 300\n").path());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("controller.frame_timeout"), std::string::npos) << bad.status().message();
  auto zero = LoadConfig(ConfigFile("[controller]\nmax_connections = 0\n").path());
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("controller.max_connections"), std::string::npos) << zero.status().message();
}

TEST(SchedulerSettings, PowerMeanExponentInPercent) {
  auto defaults = LoadConfig(ConfigFile("[scheduler]\n").path());
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_EQ(defaults.value().power_mean_p, -1.0);
  auto sia = LoadConfig(ConfigFile("[scheduler]\nobjective = power-mean\npower_mean_exponent_percent = 50\n").path());
  ASSERT_TRUE(sia.ok()) << sia.status().message();
  EXPECT_EQ(sia.value().objective, "power-mean");
  EXPECT_EQ(sia.value().power_mean_p, -0.5);
  for (const char* bad : {"0", "1001", "-50", "0.5"}) {
    auto r = LoadConfig(ConfigFile(std::string("[scheduler]\npower_mean_exponent_percent = ") + bad + "\n").path());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("scheduler.power_mean_exponent_percent"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace elastic::controller
