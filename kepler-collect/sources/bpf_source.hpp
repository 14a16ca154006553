// bpf_source.hpp — per-process metrics from kepler.bpf.c: cumulative kernel counters turned into
// interval deltas, with a running task's time credited up to the interval boundary.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kepler.h"
#include "sources/bpf_loader.hpp"
#include "sources/process_source.hpp"

namespace kepler::collect {

/// How the interval boundary is drawn (see DESIGN.md "Frames tell the truth about time", and
/// cut_boundary_ns in kepler.bpf.c):
///  1. publish the boundary T to the program a little ahead of time, then wait until T has passed;
///  2. read each CPU's state: the slice that was running at T has either ended (the program kept its
///     process and its part before T) or is still running (its part is T − its start);
///  3. read every map entry (cumulative totals), then the cut marks: a process charged at or after T
///     has a mark with its total before T; one without a mark has had nothing added since T;
///  4. total at T = mark (or map total) + its parts of slices spanning T;
///     delta = total at T − total at the previous boundary (never negative).
/// Every process and CPU is cut at the same T, however long the reads take: no slice is counted in
/// two frames, none is late. Left: when two threads of one process are first charged after T at the
/// same instant on two CPUs, or a pre-T charge is added in the nanoseconds after a post-T charge read
/// its total, one slice can land one frame off; totals stay exact.
///
/// Node CPU time is cut at the same boundary on the same clock: per CPU, the program sums the slices it
/// charges (task time), and the first slice that ends after a boundary keeps the sum as it stood at it.
/// A CPU's busy time is its task time (user_ns: the program does not split user from system time), the
/// rest of the interval is idle. Not the idle task's wall time: measured here, it came out ~1 % of a
/// quiet CPU short of the kernel's own idle clock (nohz idle time, which only ever holds less than the
/// idle task's run), for a reason not found; the task clock agrees with the kernel's idle clock. So
/// busy time the kernel keeps off task clocks (interrupts with IRQ_TIME_ACCOUNTING, hypervisor steal)
/// counts as idle here.
///
/// Entries are never drained: an entry is deleted one interval after its process was reported EXITED
/// (or when a periodic check finds its process gone). Not thread-safe.
class BpfSource final : public ProcessSource {
public:
    explicit BpfSource(const BpfOptions& options, std::string proc_root = "/proc");
    ~BpfSource() override;

    [[nodiscard]] uint32_t kind() const override { return KEPLERSHM_SOURCE_BPF; }
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] uint64_t metric_mask() const override;
    SourceSample sample() override;

    [[nodiscard]] const BpfProgram& program() const noexcept { return *program_; }

    /// Per CPU: its state as the program last left it, or nullopt when every copy of it was torn.
    using CpuStates = std::vector<std::optional<kepler_cpu_state>>;
    [[nodiscard]] CpuStates read_cpu_states() const;
    /// The clock of the program's timestamps and frame boundaries: bpf_ktime_get_ns(), the initial time
    /// namespace's CLOCK_MONOTONIC.
    [[nodiscard]] uint64_t kernel_now_ns() const noexcept;

private:
    struct Ledger {
        uint64_t effective_cpu_ns = 0;  // highest effective total published so far
        kepler_proc_stats last{};       // map value at the previous boundary
        bool exit_reported = false;
        uint32_t quiet_samples = 0;     // consecutive samples without activity
    };

    using ProcessTimes = std::unordered_map<ProcessKey, uint64_t, ProcessKeyHash>;

    /// `kernel_ns` (bpf_ktime_get_ns() time) in this process's CLOCK_MONOTONIC.
    [[nodiscard]] uint64_t user_clock_ns(uint64_t kernel_ns) const noexcept;
    uint64_t draw_boundary();
    size_t read_entries();
    ProcessTimes read_marks(uint64_t boundary);
    ProcessTimes read_spanning(const CpuStates& states, uint64_t boundary);
    NodeCpuSample node_cpu_time(const CpuStates& states, uint64_t boundary);
    ProcessKey resolve_thread(uint32_t tid) const;
    uint64_t read_drops();
    void delete_entry(const ProcessKey& key);
    void collect_stale(const std::vector<ProcessKey>& quiet);
    /// `cpu_time_ns`: the process's total at this boundary.
    ProcessActivity account(const ProcessKey& key, const kepler_proc_stats& stats, uint64_t cpu_time_ns,
                            bool in_map, SourceSample& out);

    std::unique_ptr<BpfProgram> program_;
    std::string proc_root_;
    std::unordered_map<ProcessKey, Ledger, ProcessKeyHash> ledger_;
    std::vector<ProcessKey> delete_next_;
    std::unique_ptr<kepler_proc_key[]> keys_;      // batch buffers, sized to the map (untouched until used)
    std::unique_ptr<kepler_proc_stats[]> values_;
    std::unique_ptr<kepler_proc_key[]> mark_keys_;
    std::unique_ptr<kepler_cut_mark[]> marks_;
    int64_t clock_offset_ns_ = 0;  // this time namespace's CLOCK_MONOTONIC minus bpf_ktime_get_ns()
    std::vector<uint64_t> cpu_task_ns_;  // per CPU: task time at the previous boundary
    uint64_t previous_boundary_ns_ = 0;  // bpf_ktime_get_ns() time; the load time before the first
    uint64_t drops_seen_ = 0;
    uint64_t samples_ = 0;
};

}  // namespace kepler::collect
