#include "common/logging.h"

#include <cstdio>

#include "poseidon/errors.h"

namespace poseidon {

LogLevel parseLogLevel(const std::string& name) {
  if (name == "error") return LogLevel::kError;
  if (name == "warn") return LogLevel::kWarn;
  if (name == "info") return LogLevel::kInfo;
  if (name == "debug") return LogLevel::kDebug;
  throw InputError("unknown log level '" + name + "': use error, warn, info or debug");
}

void Logger::log(LogLevel level, const std::string& message) const {
  if (!enabled(level)) return;
  static const char* kNames[] = {"error", "warn", "info", "debug"};
  std::lock_guard<std::mutex> lock(mu_);
  std::fprintf(stderr, "[poseidon rank %d %s] %s\n", rank_, kNames[static_cast<int>(level)],
               message.c_str());
  std::fflush(stderr);
}

}  // namespace poseidon
