#include <gtest/gtest.h>

#include <set>

#include "elastic/common/error.h"

namespace elastic {
namespace {

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "ok");
  EXPECT_NO_THROW(s.ThrowIfError());
}

TEST(StatusTest, ErrorCarriesKindAndMessage) {
  Status s(ErrorKind::kInvalidArgument, "MIN 4 is greater than MAX 2");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "invalid-argument: MIN 4 is greater than MAX 2");
  try {
    s.ThrowIfError();
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(e.what(), "MIN 4 is greater than MAX 2");
  }
}

TEST(ResultTest, HoldsValueOrStatus) {
  Result<int> good(7);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good.value(), 7);
  EXPECT_TRUE(good.status().ok());

  Result<int> bad(Status(ErrorKind::kNotFound, "no job 12"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::kNotFound);
  EXPECT_THROW(bad.value(), Error);
}

TEST(ResultTest, RefusesOkStatus) { EXPECT_THROW(Result<int>(Status::Ok()), Error); }

TEST(ErrorKindTest, NamesAreDistinct) {
  std::set<std::string_view> names;
  for (ErrorKind k : {ErrorKind::kInvalidArgument, ErrorKind::kConfig, ErrorKind::kUnavailable,
                      ErrorKind::kPermission, ErrorKind::kNotFound, ErrorKind::kTimeout,
                      ErrorKind::kProtocol, ErrorKind::kInternal}) {
    names.insert(ErrorKindName(k));
  }
  EXPECT_EQ(names.size(), 8u);
}

}  // namespace
}  // namespace elastic
