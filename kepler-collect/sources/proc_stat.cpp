#include "sources/proc_stat.hpp"

#include <unistd.h>

#include "common/text_io.hpp"

namespace kepler::collect {

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
        // Fields after the comm start at field 3 (state): index i here is field i + 3.
        const std::vector<std::string_view> rest = split_fields(text.substr(close + 1));
        if (rest.size() < 20 || rest[0].size() != 1) return std::nullopt;
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
    } catch (...) {  // allocation failure: treat like unreadable
        return std::nullopt;
    }
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
