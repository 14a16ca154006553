#include "common/text_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <memory>

#include <fmt/format.h>

namespace kepler::collect {

ReadResult read_text_file(const std::string& path, size_t max_bytes) {
    ReadResult result;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        result.error = errno;
        result.message = fmt::format("cannot open {}: {}", path, std::strerror(result.error));
        return result;
    }
    // Chunked through a stack buffer: most of these files are a few bytes, and reading one byte more
    // than allowed tells "exactly max_bytes" apart from "too long".
    char chunk[4096];
    while (result.text.size() <= max_bytes) {
        const ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0) {
            if (errno == EINTR) continue;
            result.error = errno;
            result.message = fmt::format("cannot read {}: {}", path, std::strerror(result.error));
            break;
        }
        if (n == 0) break;
        result.text.append(chunk, static_cast<size_t>(n));
    }
    ::close(fd);
    if (result.error == 0 && result.text.size() > max_bytes) {
        result.error = EFBIG;
        result.message = fmt::format("{} is larger than the {} bytes expected of it", path, max_bytes);
    }
    if (result.error != 0) result.text.clear();
    return result;
}

std::string read_text_file_or_throw(const std::string& path, size_t max_bytes) {
    ReadResult r = read_text_file(path, max_bytes);
    if (!r.ok()) throw CollectError(r.message);
    return std::move(r.text);
}

std::string_view trim(std::string_view text) noexcept {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    const auto last = text.find_last_not_of(" \t\r\n");
    return text.substr(first, last - first + 1);
}

std::optional<uint64_t> parse_u64(std::string_view text) noexcept {
    text = trim(text);
    if (text.empty()) return std::nullopt;
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

uint64_t parse_u64_or_throw(std::string_view text, std::string_view what) {
    if (auto v = parse_u64(text)) return *v;
    const std::string_view shown = text.substr(0, 64);
    throw CollectError(fmt::format("{}: expected an unsigned decimal number, got '{}'", what, shown));
}

std::vector<std::string_view> split_fields(std::string_view text, std::string_view separators) {
    std::vector<std::string_view> fields;
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t start = text.find_first_not_of(separators, pos);
        if (start == std::string_view::npos) break;
        size_t end = text.find_first_of(separators, start);
        if (end == std::string_view::npos) end = text.size();
        fields.push_back(text.substr(start, end - start));
        pos = end;
    }
    return fields;
}

std::vector<std::string_view> split_cmdline(std::string_view cmdline) {
    std::vector<std::string_view> args;
    size_t pos = 0;
    while (pos < cmdline.size()) {
        size_t end = cmdline.find('\0', pos);
        if (end == std::string_view::npos) end = cmdline.size();  // the last argument, unterminated
        args.push_back(cmdline.substr(pos, end - pos));
        pos = end + 1;
    }
    return args;
}

std::vector<std::string_view> split_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        lines.push_back(text.substr(pos, end - pos));
        pos = end + 1;
    }
    return lines;
}

bool starts_with(std::string_view text, std::string_view prefix) noexcept { return text.substr(0, prefix.size()) == prefix; }

bool ends_with(std::string_view text, std::string_view suffix) noexcept {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

namespace {
uint64_t clock_now(clockid_t clock) noexcept {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace

std::vector<std::string> list_directory(const std::string& path) {
    std::vector<std::string> names;
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path.c_str()), closedir);
    if (!dir) return names;
    while (const dirent* d = readdir(dir.get())) {
        const std::string_view name = d->d_name;
        if (name != "." && name != "..") names.emplace_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
}

uint64_t monotonic_now_ns() noexcept { return clock_now(CLOCK_MONOTONIC); }
uint64_t realtime_now_ns() noexcept { return clock_now(CLOCK_REALTIME); }

}  // namespace kepler::collect
