// plugstack.conf arguments of the plugin: strict parsing, defaults, exact messages.
#include <gtest/gtest.h>

#include "site_config.h"

namespace elastic::spank {
namespace {

Result<SiteConfig> Parse(std::vector<std::string> args) { return ParseSiteConfig(args); }

TEST(SiteConfigTest, DefaultsNeedOnlyTheController) {
  auto c = Parse({"controller=ctl.example.org:6820"});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c.value().enabled);
  EXPECT_EQ(c.value().controller->host, "ctl.example.org");
  EXPECT_EQ(c.value().controller->port, 6820);
  EXPECT_EQ(c.value().max_gpus, 1024);
  EXPECT_FALSE(c.value().max_batch.has_value());
  EXPECT_TRUE(c.value().partitions.empty());
  EXPECT_EQ(c.value().default_lr_scaling, "none");
  EXPECT_EQ(c.value().register_timeout_ms, 5000);
}

TEST(SiteConfigTest, EveryKey) {
  auto c = Parse({"enabled=1", "controller=[::1]:7000", "max_gpus=64", "max_batch=8192", "partitions=gpu,debug",
                  "default_lr_scaling=sqrt", "register_timeout=2", "munge_socket=/run/munge/munge.socket.2"});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c.value().controller->host, "::1");
  EXPECT_EQ(c.value().controller->ToString(), "[::1]:7000");
  EXPECT_EQ(c.value().max_gpus, 64);
  EXPECT_EQ(*c.value().max_batch, 8192);
  EXPECT_EQ(c.value().partitions, (std::vector<std::string>{"gpu", "debug"}));
  EXPECT_EQ(c.value().default_lr_scaling, "sqrt");
  EXPECT_EQ(c.value().register_timeout_ms, 2000);
  EXPECT_EQ(c.value().munge_socket, "/run/munge/munge.socket.2");
}

TEST(SiteConfigTest, DisabledNeedsNoController) {
  auto c = Parse({"enabled=0"});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c.value().enabled);
}

TEST(SiteConfigTest, BadArgumentsAreRefusedWithTheirMessage) {
  const std::pair<std::vector<std::string>, const char*> cases[] = {
      {{}, "plugstack.conf: controller=HOST:PORT is required (or enabled=0)"},
      {{"controller=ctl:6820", "colour=blue"},
       "plugstack.conf: unknown key 'colour' (known keys: enabled, controller, max_gpus, max_batch, partitions, "
       "default_lr_scaling, register_timeout, gpu_types, munge_socket)"},
      {{"controller=ctl:6820", "max_gpus"}, "plugstack.conf: argument 'max_gpus' is not key=value"},
      {{"controller=ctl:6820", "max_gpus="}, "plugstack.conf: max_gpus: empty value"},
      {{"controller=ctl:6820", "max_gpus=0"}, "plugstack.conf: max_gpus: '0' is too small (at least 1)"},
      {{"controller=ctl:6820", "max_gpus=lots"}, "plugstack.conf: max_gpus: 'lots' is not a non-negative integer"},
      {{"controller=ctl:6820", "max_gpus=8", "max_gpus=16"}, "plugstack.conf: key 'max_gpus' is given twice"},
      {{"controller=ctl"}, "plugstack.conf: controller: 'ctl' is not HOST:PORT"},
      {{"controller=ctl:0"}, "plugstack.conf: controller port: '0' is too small (at least 1)"},
      {{"controller=ctl:70000"}, "plugstack.conf: controller port: '70000' is too large (at most 65535)"},
      {{"controller=:6820"}, "plugstack.conf: controller: ':6820' has no host"},
      {{"controller=c/tl:6820"}, "plugstack.conf: controller: host 'c/tl' has a character not allowed in a host name"},
      {{"enabled=maybe"}, "plugstack.conf: enabled: 'maybe' is not a boolean (use 1 or 0)"},
      {{"controller=ctl:1", "default_lr_scaling=cubic"},
       "plugstack.conf: default_lr_scaling: 'cubic' is not one of none, linear, sqrt or adascale"},
      {{"controller=ctl:1", "partitions=gpu,,cpu"}, "plugstack.conf: partitions: 'gpu,,cpu' has an empty item"},
      {{"controller=ctl:1", "partitions=gpu,gpu"}, "plugstack.conf: partitions: 'gpu' is listed twice"},
      {{"controller=ctl:1", "register_timeout=61"}, "plugstack.conf: register_timeout: '61' is too large (at most 60)"},
      {{"controller=ctl:1", "gpu_types=a100,,v100"}, "plugstack.conf: gpu_types: 'a100,,v100' has an empty item"},
      {{"controller=ctl:1", "munge_socket=munge.sock"},
       "plugstack.conf: munge_socket: 'munge.sock' is not an absolute path"},
  };
  for (const auto& [args, message] : cases) {
    auto c = Parse(args);
    ASSERT_FALSE(c.ok()) << "accepted: " << (args.empty() ? "" : args.back());
    EXPECT_EQ(c.status().kind(), ErrorKind::kConfig);
    EXPECT_EQ(c.status().message(), message);
  }
}

TEST(SiteConfigTest, KeysAreDocumented) {
  auto keys = SiteConfigKeys();
  EXPECT_EQ(keys.size(), 9u);
  for (const auto& [key, help] : keys) EXPECT_FALSE(help.empty()) << key;
}

}  // namespace
}  // namespace elastic::spank
