#include <gtest/gtest.h>

#include "elastic/common/log.h"

namespace elastic {
namespace {

class LoggerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<MemorySink>();
    Logger::Get().SetSinks({sink_});
    Logger::Get().SetLevel(LogLevel::kInfo);
  }
  void TearDown() override {
    Logger::Get().SetSinks({std::make_shared<StderrSink>("elastic")});
    Logger::Get().SetLevel(LogLevel::kInfo);
  }
  std::shared_ptr<MemorySink> sink_;
};

TEST_F(LoggerTest, FormatsArgumentsAndKeepsComponent) {
  Log(LogLevel::kWarning, "optimizer", "job ", 42, " has ", 2.5, " GPUs");
  auto entries = sink_->entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].level, LogLevel::kWarning);
  EXPECT_EQ(entries[0].component, "optimizer");
  EXPECT_EQ(entries[0].message, "job 42 has 2.5 GPUs");
}

TEST_F(LoggerTest, DropsMessagesBelowLevel) {
  Log(LogLevel::kDebug, "x", "hidden");
  Log(LogLevel::kVerbose, "x", "hidden");
  Log(LogLevel::kError, "x", "shown");
  ASSERT_EQ(sink_->entries().size(), 1u);
  EXPECT_EQ(sink_->entries()[0].message, "shown");
  Logger::Get().SetLevel(LogLevel::kDebug);
  Log(LogLevel::kDebug, "x", "now shown");
  EXPECT_EQ(sink_->entries().size(), 2u);
}

TEST_F(LoggerTest, DoesNotFormatDisabledMessages) {
  int formatted = 0;
  struct Counter {
    int* n;
  };
  struct Printer {
    static std::ostream& Print(std::ostream& os, const Counter& c) {
      ++*c.n;
      return os;
    }
  };
  Counter c{&formatted};
  auto log_counted = [&](LogLevel level) {
    if (Logger::Get().Enabled(level)) {
      std::ostringstream os;
      Printer::Print(os, c);
      Logger::Get().Write(level, "x", os.str());
    }
  };
  log_counted(LogLevel::kDebug);
  EXPECT_EQ(formatted, 0);
  log_counted(LogLevel::kInfo);
  EXPECT_EQ(formatted, 1);
}

TEST_F(LoggerTest, SeveralSinksReceiveEveryMessage) {
  auto second = std::make_shared<MemorySink>();
  Logger::Get().AddSink(second);
  Log(LogLevel::kInfo, "c", "m");
  EXPECT_EQ(sink_->entries().size(), 1u);
  EXPECT_EQ(second->entries().size(), 1u);
}

TEST(LogLevelTest, ParsesEveryNameAndRejectsOthers) {
  for (LogLevel l : {LogLevel::kError, LogLevel::kWarning, LogLevel::kInfo, LogLevel::kVerbose,
                     LogLevel::kDebug}) {
    auto parsed = ParseLogLevel(LogLevelName(l));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, l);
  }
  EXPECT_FALSE(ParseLogLevel("INFO").has_value());
  EXPECT_FALSE(ParseLogLevel("").has_value());
  EXPECT_FALSE(ParseLogLevel("trace").has_value());
}

}  // namespace
}  // namespace elastic
