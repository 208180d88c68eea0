// The initial world over several nodes as one launch (elastic_mpi/launch/spanning_world.h): the
// DVM's host list, the world-end record tied to one launch and the other launchers' wait for it.
// Without MPI.
#include "spanning_world.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace elastic::launch {
namespace {

class SpanningWorldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/elastic-spanning-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

NodeRecord Node(const std::string& name, int ranks) {
  NodeRecord r;
  r.node = name;
  r.ranks = ranks;
  return r;
}

TEST(SpanningHostsTest, NodeGroupOrderWithEachNodesRanks) {
  EXPECT_EQ(SpanningHosts({Node("n1", 4), Node("n2", 2), Node("n3", 1)}), "n1:4,n2:2,n3:1");
  EXPECT_EQ(NodeStarts({Node("n1", 4), Node("n2", 2), Node("n3", 1)}), "0,4,6");
  EXPECT_EQ(NodeStarts({Node("n1", 3)}), "0");
}

TEST(SpanningHostsTest, OnlyWhenEveryNodeGroupHasANodeOfItsOwn) {
  EXPECT_TRUE(OneGroupPerNode({Node("n1", 1), Node("n2", 1)}));
  EXPECT_FALSE(OneGroupPerNode({Node("vm", 2), Node("vm", 1)})) << "node groups simulated on one machine";
  EXPECT_FALSE(OneGroupPerNode({Node("n1", 1), Node("", 1)})) << "a launcher that named no node";
  EXPECT_FALSE(OneGroupPerNode({Node("n1", 1)}));
}

TEST(NodeRecordTest, CarriesTheNodeName) {
  NodeRecord r = Node("n7", 2);
  r.uri = "file:/x";
  auto back = ParseNodeRecord(FormatNodeRecord(r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value().node, "n7");
  EXPECT_EQ(back.value().ranks, 2);
}

TEST_F(SpanningWorldTest, WorldEndBelongsToOneLaunch) {
  EXPECT_FALSE(ReadWorldEnd(dir_, "prte-uri 1").has_value());
  ASSERT_TRUE(WriteWorldEnd(dir_, "prte-uri 1", 75));
  ASSERT_TRUE(ReadWorldEnd(dir_, "prte-uri 1").has_value());
  EXPECT_EQ(*ReadWorldEnd(dir_, "prte-uri 1"), 75);
  // An earlier launch's record (another rendezvous) is not this one's end.
  EXPECT_FALSE(ReadWorldEnd(dir_, "prte-uri 2").has_value());
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/world.end").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(SpanningWorldTest, OtherLaunchersEndWithTheWorldsStatusAndForwardMeanwhile) {
  ASSERT_TRUE(WriteWorldEnd(dir_, "old", 0));  // a stale record: not taken
  std::thread leader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    WriteWorldEnd(dir_, "uri", 3);
  });
  int polls = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = AwaitWorldEnd(dir_, "uri", [&] { ++polls; });
  leader.join();
  EXPECT_EQ(rc, 3);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  EXPECT_GE(polls, 3) << "signals are forwarded while it waits";
}

}  // namespace
}  // namespace elastic::launch
