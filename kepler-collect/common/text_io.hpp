// text_io.hpp — bounded reads of small kernel text files (procfs, sysfs, cgroupfs) and strict parsing.
//
// Everything these functions read is untrusted: sizes are capped, numbers are parsed strictly (no
// sign, no trailing garbage, no overflow) and errors name the file and the offending text.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kepler::collect {

/// A collector error with a message that names the file, value or flag at fault.
class CollectError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Result of a bounded read: the text, or errno and a message naming the path.
struct ReadResult {
    std::string text;
    int error = 0;            // errno of the failing call, 0 on success
    std::string message;      // "cannot read /sys/...: Permission denied"
    [[nodiscard]] bool ok() const noexcept { return error == 0; }
};

/// Reads at most `max_bytes` of `path`; more than that is an error (EFBIG), never silent truncation.
[[nodiscard]] ReadResult read_text_file(const std::string& path, size_t max_bytes = 64 * 1024);

/// Like read_text_file but throws CollectError on failure.
[[nodiscard]] std::string read_text_file_or_throw(const std::string& path, size_t max_bytes = 64 * 1024);

/// Reads an unsigned decimal number (surrounding whitespace allowed); nullopt for anything else.
[[nodiscard]] std::optional<uint64_t> parse_u64(std::string_view text) noexcept;

/// parse_u64 that throws CollectError naming `what` (a path or a field) on bad input.
[[nodiscard]] uint64_t parse_u64_or_throw(std::string_view text, std::string_view what);

[[nodiscard]] std::string_view trim(std::string_view text) noexcept;

/// Splits on any run of `separators`; empty fields are dropped.
[[nodiscard]] std::vector<std::string_view> split_fields(std::string_view text, std::string_view separators = " \t\n");

/// The arguments of a /proc/<pid>/cmdline (NUL-terminated each); empty arguments are kept, so an
/// option's value stays next to its option.
[[nodiscard]] std::vector<std::string_view> split_cmdline(std::string_view cmdline);

/// Splits into lines (without the '\n'); a trailing newline makes no empty last line.
[[nodiscard]] std::vector<std::string_view> split_lines(std::string_view text);

[[nodiscard]] bool starts_with(std::string_view text, std::string_view prefix) noexcept;
[[nodiscard]] bool ends_with(std::string_view text, std::string_view suffix) noexcept;

/// The names in a directory, sorted, without "." and ".."; empty when it cannot be read.
[[nodiscard]] std::vector<std::string> list_directory(const std::string& path);

/// Nanoseconds on CLOCK_MONOTONIC / CLOCK_REALTIME (the clocks of the frame header).
[[nodiscard]] uint64_t monotonic_now_ns() noexcept;
[[nodiscard]] uint64_t realtime_now_ns() noexcept;

}  // namespace kepler::collect
