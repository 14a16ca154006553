#include "sources/proc_stat.hpp"

#include <unistd.h>

#include <array>

#include "common/text_io.hpp"

namespace kepler::collect {

namespace {
constexpr bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\n'; }
}  // namespace

std::optional<ProcPidStat> parse_proc_pid_stat(std::string_view text) noexcept {
    const size_t open = text.find('(');
    const size_t close = text.rfind(')');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open) return std::nullopt;
    const auto pid = parse_u64(text.substr(0, open));
    if (!pid || *pid == 0 || *pid > UINT32_MAX) return std::nullopt;

    ProcPidStat stat;
    stat.pid = static_cast<uint32_t>(*pid);
    try {
        stat.comm.assign(text.substr(open + 1, std::min<size_t>(close - open - 1, 64)));
    } catch (...) {  // allocation failure: treat like unreadable
        return std::nullopt;
    }
    // Fields after the comm start at field 3 (state): index i here is field i + 3. Only the first 20
    // are needed; walking them by hand (rather than split_fields) is most of a scan's user-space time.
    constexpr size_t kFieldsNeeded = 20;
    std::array<std::string_view, kFieldsNeeded> rest;
    size_t found = 0;
    const std::string_view after = text.substr(close + 1);
    for (size_t pos = 0; pos < after.size() && found < kFieldsNeeded;) {
        while (pos < after.size() && is_space(after[pos])) ++pos;
        const size_t start = pos;
        while (pos < after.size() && !is_space(after[pos])) ++pos;
        if (pos > start) rest[found++] = after.substr(start, pos - start);
    }
    if (found < kFieldsNeeded || rest[0].size() != 1) return std::nullopt;
    stat.state = rest[0][0];
    const auto ppid = parse_u64(rest[1]);
    const auto flags = parse_u64(rest[6]);
    const auto utime = parse_u64(rest[11]);
    const auto stime = parse_u64(rest[12]);
    const auto cutime = parse_u64(rest[13]);
    const auto cstime = parse_u64(rest[14]);
    const auto start = parse_u64(rest[19]);
    if (!ppid || !flags || !utime || !stime || !cutime || !cstime || !start) return std::nullopt;
    if (*ppid > UINT32_MAX || *flags > UINT32_MAX) return std::nullopt;
    stat.ppid = static_cast<uint32_t>(*ppid);
    stat.flags = static_cast<uint32_t>(*flags);
    stat.utime_ticks = *utime;
    stat.stime_ticks = *stime;
    stat.children_ticks = *cutime + *cstime;
    stat.start_ticks = *start;
    return stat;
}

uint64_t clock_ticks_per_second() noexcept {
    static const uint64_t ticks = [] {
        const long v = sysconf(_SC_CLK_TCK);
        return v > 0 ? static_cast<uint64_t>(v) : 100u;
    }();
    return ticks;
}

}  // namespace kepler::collect
