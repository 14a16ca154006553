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

private:
    std::string path_;
    std::vector<CpuTicks> previous_;
};

}  // namespace kepler::collect
