// proc_stat.hpp — parsers for /proc/<pid>/stat and /proc/stat (pure functions over text, so tests feed
// them fixtures) and the clock-tick conversion they share.
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
    uint32_t flags = 0;         // 9  (PF_KTHREAD = 0x00200000)
    uint64_t utime_ticks = 0;   // 14
    uint64_t stime_ticks = 0;   // 15
    uint64_t start_ticks = 0;   // 22 starttime, clock ticks since boot
};

constexpr uint32_t kPfKthread = 0x00200000;

/// Parses one /proc/<pid>/stat line. The comm may contain spaces and ')' — it ends at the LAST ')'.
/// Returns nullopt for malformed text.
[[nodiscard]] std::optional<ProcPidStat> parse_proc_pid_stat(std::string_view text) noexcept;

/// One "cpuN" line of /proc/stat, in clock ticks.
struct CpuTicks {
    uint32_t cpu = 0;
    uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
};

/// The per-CPU lines of /proc/stat (the aggregate "cpu" line is skipped). Throws CollectError on
/// malformed cpu lines; lines other than cpu lines are ignored.
[[nodiscard]] std::vector<CpuTicks> parse_proc_stat_cpus(std::string_view text);

/// sysconf(_SC_CLK_TCK): USER_HZ, the unit of every tick value in procfs.
[[nodiscard]] uint64_t clock_ticks_per_second() noexcept;
[[nodiscard]] inline uint64_t ns_per_tick() noexcept { return 1'000'000'000ull / clock_ticks_per_second(); }

}  // namespace kepler::collect
