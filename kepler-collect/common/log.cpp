#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <string>

namespace kepler::collect {

namespace {
std::atomic<int> current_level{static_cast<int>(LogLevel::info)};

const char* level_name(LogLevel level) noexcept {
    switch (level) {
        case LogLevel::debug: return "debug";
        case LogLevel::info: return "info";
        case LogLevel::warn: return "warning";
        case LogLevel::error: return "error";
    }
    return "?";
}
}  // namespace

void set_log_level(LogLevel level) noexcept { current_level.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel log_level() noexcept { return static_cast<LogLevel>(current_level.load(std::memory_order_relaxed)); }

void log_line(LogLevel level, std::string_view text) noexcept {
    try {
        const std::string line = fmt::format("kepler-collect: {}: {}\n", level_name(level), text);
        // One write per line so lines of concurrent threads never interleave.
        [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    } catch (...) {
        // Logging must never take the collector down (out of memory while formatting).
    }
}

}  // namespace kepler::collect
