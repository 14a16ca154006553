// log.hpp — the daemons' one-line log messages on stderr via fmt: "<program>: <level>: <text>", with a
// level below which nothing is formatted (--log-level). Thread-safe (one write(2) per line). In namespace
// kepler so that kepler::{collect,estimate,feed} call log_info(...) unqualified.
#pragma once

#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace kepler {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

/// The program name that starts every line ("kepler-collect"); set once at start-up, before threads.
void set_log_program(std::string_view program);
void set_log_level(LogLevel level) noexcept;
[[nodiscard]] LogLevel log_level() noexcept;
/// "debug", "info", "warning" (or "warn") and "error"; nullopt for anything else.
[[nodiscard]] std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;
void log_line(LogLevel level, std::string_view text) noexcept;

template <class... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
    if (level < log_level()) return;
    log_line(level, fmt::format(format, std::forward<Args>(args)...));
}

template <class... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) { log(LogLevel::info, format, std::forward<Args>(args)...); }
template <class... Args>
void log_warn(fmt::format_string<Args...> format, Args&&... args) { log(LogLevel::warn, format, std::forward<Args>(args)...); }
template <class... Args>
void log_error(fmt::format_string<Args...> format, Args&&... args) { log(LogLevel::error, format, std::forward<Args>(args)...); }
template <class... Args>
void log_debug(fmt::format_string<Args...> format, Args&&... args) { log(LogLevel::debug, format, std::forward<Args>(args)...); }

}  // namespace kepler
