// procfs_source.hpp — per-process CPU time from /proc/<pid>/stat (utime + stime): the unprivileged
// source, and the fallback when eBPF cannot be loaded.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "sources/proc_stat.hpp"
#include "sources/proc_stat_files.hpp"
#include "sources/process_source.hpp"

namespace kepler::collect {

/// Scans every /proc/<pid> once per interval. utime + stime is the scheduler's nanosecond run time of
/// the whole process, truncated to clock ticks (10 ms at USER_HZ=100): the truncation does not
/// accumulate, so a delta is within a tick or two of the truth.
///
/// Node busy time is on the same clock: the processes' deltas plus what processes that ended between
/// two scans ran, which reaches their reaper's cutime + cstime when it waits for them. /proc/stat is
/// not read: its busy time is sampled at each tick, so it overcounts tasks that wake on the tick and
/// undercounts short bursts between ticks (issue 18). The time of processes that ended is in node busy
/// time and in the frame's unaccounted record (no record names them); a child nobody waits for
/// (SIGCHLD ignored) takes the time it ran since the previous scan with it.
class ProcfsSource final : public ProcessSource {
public:
    /// Takes the baseline scan: the first sample() reports deltas since construction.
    explicit ProcfsSource(std::string proc_root = "/proc");

    [[nodiscard]] uint32_t kind() const override { return KEPLERSHM_SOURCE_PROCFS; }
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] uint64_t metric_mask() const override { return KEPLERSHM_METRIC_CPU_TIME; }
    SourceSample sample() override;

    /// All processes currently in /proc (exposed for tests and the workload resolver).
    [[nodiscard]] static std::vector<ProcPidStat> scan(const std::string& proc_root);

    /// `busy_ns` of node time over `cpus` CPUs and `wall_ns`, as one equal share per CPU (flagged
    /// KEPLERSHM_CPU_NODE_SHARE): procfs does not say where a process ran.
    [[nodiscard]] static NodeCpuSample spread_over_cpus(uint64_t busy_ns, uint64_t wall_ns, uint32_t cpus);

private:
    /// What one process had run at the previous scan, in ticks.
    struct Seen {
        uint64_t own_ticks = 0;
        uint64_t children_ticks = 0;
        uint32_t ppid = 0;
        [[nodiscard]] static Seen of(const ProcPidStat& p) noexcept {
            return Seen{p.utime_ticks + p.stime_ticks, p.children_ticks, p.ppid};
        }
    };
    using SeenMap = std::unordered_map<ProcessKey, Seen, ProcessKeyHash>;
    [[nodiscard]] static uint64_t ended_ticks(const SeenMap& before, const SeenMap& now);

    std::string proc_root_;
    ProcStatFiles files_;  // after proc_root_: initialised from it
    SeenMap previous_;
    uint64_t previous_read_ns_ = 0;
    uint32_t cpus_ = 1;
};

}  // namespace kepler::collect
