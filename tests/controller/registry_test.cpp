// The registry's extension states: the stored names are the ones elasticd always wrote, and the
// one transition table allows the protocol's path and refuses the rest.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "registry.h"

namespace elastic::controller {
namespace {

const std::vector<std::string> kStoredNames{"submitting", "submitted", "registered", "ready",  "joining",
                                            "joined",     "leaving",   "left",       "failed", "cancelled"};

TEST(RegistryTest, StateNamesRoundTrip) {
  for (const std::string& name : kStoredNames) {
    auto s = ParseExtState(name);
    ASSERT_TRUE(s.has_value()) << name;
    EXPECT_EQ(ExtStateName(*s), name);
  }
  EXPECT_FALSE(ParseExtState("Joined").has_value());
  EXPECT_FALSE(ParseExtState("").has_value());
}

TEST(RegistryTest, TheProtocolsPathIsAllowed) {
  Extension e;
  for (ExtState s : {ExtState::kSubmitted, ExtState::kRegistered, ExtState::kJoining, ExtState::kJoined,
                     ExtState::kLeaving, ExtState::kJoined, ExtState::kLeaving, ExtState::kLeft}) {
    EXPECT_TRUE(e.MoveTo(s)) << ExtStateName(e.state) << " -> " << ExtStateName(s);
  }
  EXPECT_FALSE(e.Active());
}

TEST(RegistryTest, EveryActiveStateMayEndAndNothingLeavesAnEnd) {
  for (const std::string& from : kStoredNames) {
    const ExtState f = *ParseExtState(from);
    for (ExtState to : {ExtState::kLeft, ExtState::kFailed, ExtState::kCancelled}) {
      const bool final_from = from == "left" || from == "failed" || from == "cancelled";
      EXPECT_EQ(ExtTransitionAllowed(f, to), !final_from || f == to) << from << " -> " << ExtStateName(to);
    }
  }
}

TEST(RegistryTest, ARefusedTransitionKeepsTheState) {
  Extension e;  // submitting
  EXPECT_FALSE(e.MoveTo(ExtState::kJoined));
  EXPECT_EQ(e.state, ExtState::kSubmitting);
  EXPECT_FALSE(ExtTransitionAllowed(ExtState::kRegistered, ExtState::kLeaving));
  EXPECT_FALSE(ExtTransitionAllowed(ExtState::kReady, ExtState::kJoining));  // ready is refused by `ready` too
  EXPECT_FALSE(ExtTransitionAllowed(ExtState::kLeft, ExtState::kJoined));
  EXPECT_TRUE(e.MoveTo(ExtState::kSubmitting));  // a state to itself is no transition
}

TEST(RegistryTest, GpuCountsFollowTheStates) {
  Registry r;
  ElasticJob job;
  job.id = 7;
  job.base_gpus = 2;
  r.jobs[7] = job;
  int64_t id = 1;
  for (ExtState s : {ExtState::kSubmitted, ExtState::kJoined, ExtState::kLeaving}) {
    Extension e;
    e.id = id;
    e.parent = 7;
    e.group = static_cast<int>(id++);
    e.gpus = 1;
    e.state = s;
    r.extensions[e.id] = e;
  }
  EXPECT_EQ(r.CurrentGpus(r.jobs[7]), 4);  // base + joined + leaving
  EXPECT_EQ(r.PlannedGpus(r.jobs[7]), 4);  // base + submitted + joined
  ASSERT_NE(r.FindExtension(7, 2), nullptr);
  EXPECT_EQ(r.FindExtension(7, 2)->state, ExtState::kJoined);
  EXPECT_EQ(r.FindExtension(8, 2), nullptr);
}

}  // namespace
}  // namespace elastic::controller
