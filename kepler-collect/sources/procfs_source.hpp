// procfs_source.hpp — per-process CPU time from /proc/<pid>/stat (utime + stime): the unprivileged
// source, and the fallback when eBPF cannot be loaded.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "sources/proc_stat.hpp"
#include "sources/process_source.hpp"

namespace kepler::collect {

/// Scans every /proc/<pid> once per interval. Time is in clock ticks (10 ms at USER_HZ=100), so short
/// intervals are coarse. A process that ends between two scans loses the time it ran since the
/// previous scan (it shows up in the frame's unaccounted record); it is counted in exited_processes.
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

private:
    std::string proc_root_;
    std::unordered_map<ProcessKey, uint64_t, ProcessKeyHash> previous_ticks_;
};

}  // namespace kepler::collect
