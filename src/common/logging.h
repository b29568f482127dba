// Runtime-levelled logging that names the rank. A Logger is an ordinary object handed to
// the components that log; there is no process-wide logger.
#pragma once

#include <mutex>
#include <string>

namespace poseidon {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Parses "error|warn|info|debug"; throws InputError otherwise.
LogLevel parseLogLevel(const std::string& name);

class Logger {
 public:
  Logger(int rank, LogLevel level) : rank_(rank), level_(level) {}
  bool enabled(LogLevel level) const { return level <= level_; }
  void log(LogLevel level, const std::string& message) const;
  void info(const std::string& m) const { log(LogLevel::kInfo, m); }
  void warn(const std::string& m) const { log(LogLevel::kWarn, m); }
  void debug(const std::string& m) const { log(LogLevel::kDebug, m); }
  int rank() const { return rank_; }

 private:
  int rank_;
  LogLevel level_;
  mutable std::mutex mu_;  // keeps lines from different threads whole
};

}  // namespace poseidon
