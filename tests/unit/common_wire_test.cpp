// The wire protocol's framing and envelope (no munged needed): frames over a socketpair,
// refusals with their exact messages, replies and their status.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "elastic/common/config.h"
#include "elastic/common/wire.h"

namespace elastic::wire {
namespace {

struct Pair {
  int fds[2] = {-1, -1};
  Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0); }
  ~Pair() {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
};

Deadline Soon() { return Clock::now() + std::chrono::milliseconds(500); }

TEST(WireTest, FramesRoundTrip) {
  Pair p;
  ASSERT_TRUE(WriteFrame(p.fds[0], "hello", Soon()).ok());
  ASSERT_TRUE(WriteFrame(p.fds[0], "", Soon()).ok());
  auto a = ReadFrame(p.fds[1], Soon());
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a.value(), "hello");
  auto b = ReadFrame(p.fds[1], Soon());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value(), "");
}

TEST(WireTest, OversizedFrameIsRefusedUnread) {
  Pair p;
  uint32_t len = htonl(kMaxFrameBytes + 1);
  ASSERT_EQ(write(p.fds[0], &len, 4), 4);
  auto r = ReadFrame(p.fds[1], Soon());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kProtocol);
  EXPECT_EQ(r.status().message(), "frame of 1048577 bytes exceeds the limit of 1048576");
  std::string big(kMaxFrameBytes + 1, 'x');
  EXPECT_EQ(WriteFrame(p.fds[0], big, Soon()).kind(), ErrorKind::kInvalidArgument);
}

TEST(WireTest, ClosedAndSilentPeers) {
  {
    Pair p;
    close(p.fds[0]);
    p.fds[0] = -1;
    auto r = ReadFrame(p.fds[1], Soon());
    EXPECT_EQ(r.status().kind(), ErrorKind::kUnavailable);
    EXPECT_EQ(r.status().message(), "connection closed");
  }
  {
    Pair p;
    uint32_t len = htonl(10);
    ASSERT_EQ(write(p.fds[0], &len, 4), 4);
    ASSERT_EQ(write(p.fds[0], "abc", 3), 3);
    close(p.fds[0]);
    p.fds[0] = -1;
    EXPECT_EQ(ReadFrame(p.fds[1], Soon()).status().message(), "connection closed in the middle of a frame");
  }
  {
    Pair p;
    auto r = ReadFrame(p.fds[1], Clock::now() + std::chrono::milliseconds(50));
    EXPECT_EQ(r.status().kind(), ErrorKind::kTimeout);
  }
}

TEST(WireTest, EnvelopeRefusalsHaveExactMessages) {
  const std::pair<std::string, std::string> cases[] = {
      {"{not json", "message is not valid JSON"},
      {"[1]", "message is not a JSON object"},
      {R"({"type":"poll"})", R"(message has no integer protocol version "v")"},
      {R"({"v":"1","type":"poll"})", R"(message has no integer protocol version "v")"},
      {R"({"v":2,"type":"poll"})", "unsupported protocol version 2 (this side speaks 1)"},
      {R"({"v":1})", R"(message has no "type")"},
      {R"({"v":1,"type":""})", R"(message has no "type")"},
  };
  for (const auto& [payload, message] : cases) {
    auto r = ParseMessage(payload);
    ASSERT_FALSE(r.ok()) << payload;
    EXPECT_EQ(r.status().kind(), ErrorKind::kProtocol);
    EXPECT_EQ(r.status().message(), message);
  }
  EXPECT_EQ(ParseMessage(std::string(kMaxMessageBytes + 1, ' ')).status().message(),
            "message of 524289 bytes exceeds the limit of 524288");
  auto ok = ParseMessage(R"({"v":1,"type":"poll","job":7,"extra":true})");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value()["job"], 7);
}

TEST(WireTest, RepliesCarryTheirStatus) {
  EXPECT_TRUE(ReplyStatus(MakeReply(3, {{"x", 1}})).ok());
  auto err = MakeErrorReply(4, Status(ErrorKind::kPermission, "uid 1 does not own job 2"));
  Status s = ReplyStatus(err);
  EXPECT_EQ(s.kind(), ErrorKind::kPermission);
  EXPECT_EQ(s.message(), "uid 1 does not own job 2");
  EXPECT_EQ(ReplyStatus(nlohmann::json{{"type", "poll"}}).kind(), ErrorKind::kProtocol);
}

TEST(WireTest, MalformedErrorRepliesAreProtocolErrors) {
  // Found by fuzz_wire: these used to throw out of ReplyStatus.
  for (const char* text : {R"({"v":1,"type":"reply","ok":false,"error":6})",
                           R"({"v":1,"type":"reply","ok":false,"error":{"kind":1}})",
                           R"({"v":1,"type":"reply","ok":false,"error":{"message":[]}})",
                           R"({"v":1,"type":"reply","ok":false})"}) {
    Status s = ReplyStatus(nlohmann::json::parse(text));
    EXPECT_EQ(s.kind(), ErrorKind::kProtocol) << text;
  }
  Status unknown = ReplyStatus(nlohmann::json::parse(R"({"type":"reply","ok":false,"error":{"kind":"odd","message":"m"}})"));
  EXPECT_EQ(unknown.kind(), ErrorKind::kInternal);
  EXPECT_EQ(unknown.message(), "m");
}

TEST(ConfigTest, HostPortAndLists) {
  auto hp = config::ParseHostPort("[::1]:80", "x");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp.value().ToString(), "[::1]:80");
  EXPECT_EQ(config::ParseHostPort("a:b:1", "x").status().message(), "x: 'a:b:1' is not HOST:PORT");
  EXPECT_EQ(config::ParseList("a,,b", "l").status().message(), "l: 'a,,b' has an empty item");
  EXPECT_EQ(config::ParseInt("12", 1, 10, "n").status().message(), "n: '12' is too large (at most 10)");
  EXPECT_EQ(config::ParseBool("maybe", "b").status().message(), "b: 'maybe' is not a boolean (use 1 or 0)");
}

}  // namespace
}  // namespace elastic::wire
