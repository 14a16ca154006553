#include "sources/proc_stat.hpp"

#include <unistd.h>

#include <fmt/format.h>

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
        const auto flags = parse_u64(rest[6]);
        const auto utime = parse_u64(rest[11]);
        const auto stime = parse_u64(rest[12]);
        const auto start = parse_u64(rest[19]);
        if (!flags || !utime || !stime || !start || *flags > UINT32_MAX) return std::nullopt;
        stat.flags = static_cast<uint32_t>(*flags);
        stat.utime_ticks = *utime;
        stat.stime_ticks = *stime;
        stat.start_ticks = *start;
    } catch (...) {  // allocation failure: treat like unreadable
        return std::nullopt;
    }
    return stat;
}

std::vector<CpuTicks> parse_proc_stat_cpus(std::string_view text) {
    std::vector<CpuTicks> cpus;
    for (std::string_view line : split_lines(text)) {
        if (!starts_with(line, "cpu") || line.size() < 4 || line[3] == ' ') continue;  // skip "cpu  " total
        const std::vector<std::string_view> f = split_fields(line);
        // user nice system idle iowait irq softirq steal exist since Linux 2.6.11.
        if (f.size() < 9) throw CollectError(fmt::format("/proc/stat: short cpu line '{}'", line.substr(0, 80)));
        CpuTicks t;
        const std::string what = fmt::format("/proc/stat {}", f[0]);
        const uint64_t cpu = parse_u64_or_throw(f[0].substr(3), what);
        if (cpu > 1'000'000) throw CollectError(fmt::format("{}: cpu number out of range", what));
        t.cpu = static_cast<uint32_t>(cpu);
        t.user = parse_u64_or_throw(f[1], what);
        t.nice = parse_u64_or_throw(f[2], what);
        t.system = parse_u64_or_throw(f[3], what);
        t.idle = parse_u64_or_throw(f[4], what);
        t.iowait = parse_u64_or_throw(f[5], what);
        t.irq = parse_u64_or_throw(f[6], what);
        t.softirq = parse_u64_or_throw(f[7], what);
        t.steal = parse_u64_or_throw(f[8], what);
        cpus.push_back(t);
    }
    return cpus;
}

uint64_t clock_ticks_per_second() noexcept {
    static const uint64_t ticks = [] {
        const long v = sysconf(_SC_CLK_TCK);
        return v > 0 ? static_cast<uint64_t>(v) : 100u;
    }();
    return ticks;
}

}  // namespace kepler::collect
