#include "support/log/log.hpp"

#include <unistd.h>

#include <atomic>
#include <string>

namespace kepler {

namespace {
std::atomic<int> current_level{static_cast<int>(LogLevel::info)};
std::string& program() {
    static std::string name = "keplershm";
    return name;
}

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

void set_log_program(std::string_view name) { program() = std::string(name); }

void set_log_level(LogLevel level) noexcept { current_level.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel log_level() noexcept { return static_cast<LogLevel>(current_level.load(std::memory_order_relaxed)); }

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
    if (text == "debug") return LogLevel::debug;
    if (text == "info") return LogLevel::info;
    if (text == "warning" || text == "warn") return LogLevel::warn;
    if (text == "error") return LogLevel::error;
    return std::nullopt;
}

void log_line(LogLevel level, std::string_view text) noexcept {
    try {
        const std::string line = fmt::format("{}: {}: {}\n", program(), level_name(level), text);
        // One write per line so lines of concurrent threads never interleave.
        [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    } catch (...) {
        // Logging must never take a daemon down (out of memory while formatting).
    }
}

}  // namespace kepler
