// node_cpu.hpp — node CPU time per CPU from /proc/stat, as interval deltas for the frame's CPUS section:
// the fallback for sources that do not measure it on the scheduler's clock themselves (procfs).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "keplershm.h"
#include "sources/proc_stat.hpp"
#include "sources/process_source.hpp"

namespace kepler::collect {

/// Not thread-safe. The first read() primes the baseline and returns the time since boot, so the caller
/// normally calls it once at start-up and discards the result.
class NodeCpuReader {
public:
    explicit NodeCpuReader(std::string proc_root = "/proc");
    /// Deltas since the previous call. Throws CollectError when /proc/stat is unreadable or malformed.
    NodeCpuSample read();

    /// Deltas between two parsed readings (exposed for tests). A counter that went backwards (iowait
    /// does on some kernels) contributes 0, never a huge unsigned difference.
    static NodeCpuSample difference(const std::vector<CpuTicks>& before, const std::vector<CpuTicks>& after,
                                    uint64_t ns_per_tick);

    /// Puts each CPU's task time on the kernel's exact clocks. /proc/stat's user, nice and system are
    /// tick samples, which overcount tasks that wake on the tick (issue 18: by 73 %), while its idle and
    /// iowait come from the idle loop's own clock (NO_HZ; exact but for the printed tick) and each
    /// process's utime+stime is its exact runtime in ticks. So a CPU's busy time is the `elapsed_ns`
    /// between the two readings minus idle and iowait, and user/nice/system are scaled (in proportion)
    /// to that busy time less irq, softirq and steal. Without NO_HZ every field is sampled and the
    /// scaling changes little.
    static void rescale_to_idle_clock(NodeCpuSample& sample, uint64_t elapsed_ns);

private:
    std::string path_;
    std::vector<CpuTicks> previous_;
    uint64_t previous_read_ns_ = 0;
};

}  // namespace kepler::collect
