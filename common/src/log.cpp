#include "elastic/common/log.h"

#include <cstdio>
#include <ctime>

#include "elastic/common/error.h"

namespace elastic {

std::string_view LogLevelName(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kInfo: return "info";
    case LogLevel::kVerbose: return "verbose";
    case LogLevel::kDebug: return "debug";
  }
  return "info";
}

std::optional<LogLevel> ParseLogLevel(std::string_view name) noexcept {
  for (LogLevel l : {LogLevel::kError, LogLevel::kWarning, LogLevel::kInfo, LogLevel::kVerbose,
                     LogLevel::kDebug}) {
    if (LogLevelName(l) == name) return l;
  }
  return std::nullopt;
}

void StderrSink::Write(LogLevel level, std::string_view component, std::string_view message) {
  std::string line = program_;
  line += ": ";
  line += LogLevelName(level);
  line += ": ";
  if (!component.empty()) {
    line += '[';
    line += component;
    line += "] ";
  }
  line += message;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

FileSink::FileSink(const std::string& path) : file_(std::fopen(path.c_str(), "ae")) {
  if (file_ == nullptr) throw Error(ErrorKind::kConfig, "cannot open log file " + path);
}

FileSink::~FileSink() { std::fclose(file_); }

void FileSink::Write(LogLevel level, std::string_view component, std::string_view message) {
  char stamp[32];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string line = std::string(stamp) + " " + std::string(LogLevelName(level)) + ": ";
  if (!component.empty()) line += "[" + std::string(component) + "] ";
  line += message;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

void MemorySink::Write(LogLevel level, std::string_view component, std::string_view message) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.push_back({level, std::string(component), std::string(message)});
}

std::vector<MemorySink::Entry> MemorySink::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

Logger::Logger() : level_(LogLevel::kInfo) { sinks_.push_back(std::make_shared<StderrSink>("elastic")); }

Logger& Logger::Get() {
  static Logger logger;
  return logger;
}

void Logger::SetLevel(LogLevel level) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  level_ = level;
}

LogLevel Logger::level() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return level_;
}

bool Logger::Enabled(LogLevel level) const noexcept { return level <= this->level(); }

void Logger::SetSinks(std::vector<std::shared_ptr<LogSink>> sinks) {
  std::lock_guard<std::mutex> lock(mu_);
  sinks_ = std::move(sinks);
}

void Logger::AddSink(std::shared_ptr<LogSink> sink) {
  std::lock_guard<std::mutex> lock(mu_);
  sinks_.push_back(std::move(sink));
}

void Logger::Write(LogLevel level, std::string_view component, std::string_view message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (level > level_) return;
  for (auto& sink : sinks_) sink->Write(level, component, message);
}

}  // namespace elastic
