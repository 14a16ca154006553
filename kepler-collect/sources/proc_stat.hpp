// proc_stat.hpp — the parser for /proc/<pid>/stat (a pure function over text, so tests feed it fixtures)
// and the clock-tick conversion of its times.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kepler::collect {

/// The fields of /proc/<pid>/stat the collector uses (field numbers from proc(5)).
struct ProcPidStat {
    uint32_t pid = 0;           // 1
    std::string comm;           // 2, without the parentheses
    char state = '?';           // 3
    uint32_t ppid = 0;          // 4
    uint32_t flags = 0;         // 9  (PF_KTHREAD = 0x00200000)
    uint64_t utime_ticks = 0;   // 14
    uint64_t stime_ticks = 0;   // 15
    /// 16 cutime + 17 cstime: what the children this process waited for ran, their own waited-for
    /// children included. utime + stime (and these) add up to the scheduler's nanosecond run time,
    /// truncated to whole ticks.
    uint64_t children_ticks = 0;
    uint64_t start_ticks = 0;   // 22 starttime, clock ticks since boot
};

constexpr uint32_t kPfKthread = 0x00200000;

/// Parses one /proc/<pid>/stat line. The comm may contain spaces and ')' — it ends at the LAST ')'.
/// Returns nullopt for malformed text.
[[nodiscard]] std::optional<ProcPidStat> parse_proc_pid_stat(std::string_view text) noexcept;

/// sysconf(_SC_CLK_TCK): USER_HZ, the unit of every tick value in procfs.
[[nodiscard]] uint64_t clock_ticks_per_second() noexcept;
[[nodiscard]] inline uint64_t ns_per_tick() noexcept { return 1'000'000'000ull / clock_ticks_per_second(); }

}  // namespace kepler::collect
