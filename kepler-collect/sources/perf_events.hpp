// perf_events.hpp — per-CPU hardware counters (cycles, instructions, LLC misses) for the eBPF program's
// perf_event_array maps.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kepler.h"

namespace kepler::collect {

/// perf_event_attr type and config of one counter.
struct PerfCounterConfig {
    const char* name;
    uint32_t type;
    uint64_t config;
};

/// The counters in kepler_hw_counter order. LLC misses are the generalized cache event
/// LL | OP_READ << 8 | RESULT_MISS << 16 (Kepler 0.7 passed PERF_COUNT_HW_CACHE_MISSES as a HW_CACHE
/// config, which encodes a different cache, op and result).
[[nodiscard]] const std::array<PerfCounterConfig, KEPLER_HW_COUNTERS>& hardware_counter_configs() noexcept;

/// File descriptors of counting perf events, one per CPU per counter (-1 where it could not be opened).
/// Owns the descriptors. Not thread-safe.
class HardwareCounters {
public:
    HardwareCounters() = default;
    HardwareCounters(const HardwareCounters&) = delete;
    HardwareCounters& operator=(const HardwareCounters&) = delete;
    HardwareCounters(HardwareCounters&& other) noexcept;
    HardwareCounters& operator=(HardwareCounters&& other) noexcept;
    ~HardwareCounters();

    /// Opens every counter on CPUs 0..possible_cpus-1. Failures are recorded, never thrown: no PMU
    /// (ENOENT/EOPNOTSUPP, as in most VMs), no permission (EACCES/EPERM) and offline CPUs (ENODEV).
    static HardwareCounters open(uint32_t possible_cpus);

    /// True when the counter is open on at least one CPU.
    [[nodiscard]] bool available(uint32_t counter) const noexcept;
    [[nodiscard]] int fd(uint32_t counter, uint32_t cpu) const noexcept;
    [[nodiscard]] uint32_t cpu_count() const noexcept { return cpus_; }
    /// Why a counter is unavailable ("cycles: No such file or directory (no PMU)"), empty if available.
    [[nodiscard]] const std::string& reason(uint32_t counter) const noexcept { return reasons_[counter]; }

private:
    void close_all() noexcept;
    uint32_t cpus_ = 0;
    std::array<std::vector<int>, KEPLER_HW_COUNTERS> fds_;
    std::array<std::string, KEPLER_HW_COUNTERS> reasons_;
};

}  // namespace kepler::collect
