// process_source.hpp — what a per-process source (eBPF or procfs) delivers each interval.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keplershm.h"
#include "keplershm/keplershm.hpp"

namespace kepler::collect {

/// A process: (pid, start time), the protocol's key (keplershm.hpp).
using keplershm::ProcessKey;
using keplershm::ProcessKeyHash;

/// One process over one interval: deltas, plus keplershm_process_flag bits saying which are valid.
struct ProcessActivity {
    ProcessKey key;
    std::array<char, KEPLERSHM_COMM_LEN> comm{};
    uint64_t cgroup_id = 0;     // 0: unknown to the source (the workload resolver fills it)
    uint32_t flags = 0;         // enum keplershm_process_flag
    uint64_t cpu_time_ns = 0;
    uint64_t cycles = 0;
    uint64_t instructions = 0;
    uint64_t cache_misses = 0;
    uint64_t page_cache_hits = 0;
    uint64_t page_cache_misses = 0;
    std::array<uint64_t, KEPLERSHM_SOFTIRQ_VECTORS> softirq{};

    void set_comm(std::string_view text) noexcept;
};

/// Node CPU time per CPU over one interval, as deltas in ns (the frame's CPUS section).
struct NodeCpuSample {
    std::vector<keplershm_cpu_sample> cpus;  // one per CPU measured in this interval
    uint64_t busy_ns = 0;                    // Σ user+nice+system+irq+softirq+steal (MODELS.md node_cpu_busy)
};

/// Everything a source measured for one interval.
struct SourceSample {
    std::vector<ProcessActivity> processes;  // processes with any activity, plus new and exited ones
    uint64_t read_time_ns = 0;               // CLOCK_MONOTONIC of the boundary the deltas end at
    uint64_t metric_mask = 0;                // enum keplershm_metric valid for this interval
    uint64_t dropped_entries = 0;            // events the source could not store (BPF map full)
    uint64_t exited_processes = 0;           // processes that ended during the interval
    /// Places where the cut at this boundary may be off by a slice (eBPF: CPUs still being written,
    /// lost or late cut marks); 0 = exact. The frame carries it (KEPLERSHM_FRAME_CUT_INEXACT).
    uint64_t inexact_cuts = 0;
    /// Node CPU time on the same clock as the processes' and cut at the same boundary. Both sources set
    /// it (eBPF per CPU; procfs as equal per-CPU shares of the processes' busy time). nullopt: the frame
    /// goes out without node CPU time (no CPU samples, no NODE_CPU bit); /proc/stat is never read.
    std::optional<NodeCpuSample> node_cpu;
};

/// A per-process source. Not thread-safe: the collector loop owns it.
class ProcessSource {
public:
    virtual ~ProcessSource() = default;
    /// enum keplershm_source.
    [[nodiscard]] virtual uint32_t kind() const = 0;
    /// One line for the log, e.g. "bpf (sched_switch via tp_btf)".
    [[nodiscard]] virtual std::string describe() const = 0;
    /// Metrics this source can produce at all (the segment header's metric_mask, less NODE_CPU/ENERGY).
    [[nodiscard]] virtual uint64_t metric_mask() const = 0;
    /// Deltas since the previous call (the first call: since the source was created).
    virtual SourceSample sample() = 0;
};

/// Which per-process source to use, and its settings (the collector's --source and --bpf-* flags).
struct SourceSettings {
    std::string kind = "auto";         // auto | bpf | procfs
    std::string proc_root = "/proc";
    std::string bpf_attach = "auto";   // auto | tp_btf | raw_tp | tracepoint
    uint32_t bpf_max_processes = 16384;
    uint32_t bpf_max_threads = 32768;
    bool hardware_counters = true;
};

/// "bpf" or "procfs" as asked (throws CollectError when eBPF cannot load); "auto": eBPF where it
/// loads, else procfs, with the reason in the log.
[[nodiscard]] std::unique_ptr<ProcessSource> make_process_source(const SourceSettings& settings);

}  // namespace kepler::collect
