// Logging with pluggable sinks.
//
// Components log through elastic::Log(level, ...); where the text goes is decided by the sinks
// installed in the process-wide Logger: standard error by default, Slurm's log functions in
// the SPANK plugin, a file or syslog in elasticd. Messages below the logger's level are
// dropped before they are formatted.
#pragma once

#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace elastic {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kVerbose = 3, kDebug = 4 };

std::string_view LogLevelName(LogLevel level) noexcept;
// Parses "error", "warning", "info", "verbose", "debug" (case-sensitive); nullopt otherwise.
std::optional<LogLevel> ParseLogLevel(std::string_view name) noexcept;

// Receives every message at or above the logger's level. Write() may be called from several
// threads, one at a time (the logger serialises calls).
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void Write(LogLevel level, std::string_view component, std::string_view message) = 0;
};

// Writes "<program>: <level>: [<component>] <message>" lines to standard error.
class StderrSink final : public LogSink {
 public:
  explicit StderrSink(std::string program) : program_(std::move(program)) {}
  void Write(LogLevel level, std::string_view component, std::string_view message) override;

 private:
  std::string program_;
};

// Appends "<time> <level>: [<component>] <message>" lines to a file (daemons).
class FileSink final : public LogSink {
 public:
  // Opens `path` for appending; throws elastic::Error(kConfig) when it cannot.
  explicit FileSink(const std::string& path);
  ~FileSink() override;
  void Write(LogLevel level, std::string_view component, std::string_view message) override;

 private:
  std::FILE* file_;
};

// Keeps messages in memory (tests, and callers that show them later).
class MemorySink final : public LogSink {
 public:
  struct Entry {
    LogLevel level;
    std::string component;
    std::string message;
  };
  void Write(LogLevel level, std::string_view component, std::string_view message) override;
  std::vector<Entry> entries() const;

 private:
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

class Logger {
 public:
  // The process-wide logger. Starts with level kInfo and one StderrSink("elastic").
  static Logger& Get();

  void SetLevel(LogLevel level) noexcept;
  LogLevel level() const noexcept;
  bool Enabled(LogLevel level) const noexcept;
  // Replaces every sink by the given ones (ownership is shared with the caller).
  void SetSinks(std::vector<std::shared_ptr<LogSink>> sinks);
  void AddSink(std::shared_ptr<LogSink> sink);
  void Write(LogLevel level, std::string_view component, std::string_view message);

 private:
  Logger();
  mutable std::mutex mu_;
  LogLevel level_;
  std::vector<std::shared_ptr<LogSink>> sinks_;
};

// Formats its arguments with operator<< and logs them when the level is enabled.
template <typename... Args>
void Log(LogLevel level, std::string_view component, const Args&... args) {
  Logger& logger = Logger::Get();
  if (!logger.Enabled(level)) return;
  std::ostringstream os;
  (os << ... << args);
  logger.Write(level, component, os.str());
}

}  // namespace elastic
