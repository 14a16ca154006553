// bpf_source.hpp — per-process metrics from kepler.bpf.c: cumulative kernel counters turned into
// interval deltas, with a running task's time credited up to the interval boundary.
#pragma once

#include <array>
#include <chrono>
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
/// two frames, none is late. Two threads of one process first charged after T on two CPUs share the
/// first one's mark (it is inserted once). A charge from before T that a stalled vCPU adds after the
/// mark was taken lands one frame late and is counted (below); totals stay exact.
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
/// The cut is exact only once every program that stamped a charge before T has stored it: the read of
/// the per-CPU states waits (up to `kWriterPatience`) for a CPU whose state a program is writing, which
/// is how a vCPU stalled inside the program shows. A CPU still being written after that, a cut mark that
/// did not fit, or a charge from before T added after its process's mark was taken (see mark_boundary()
/// in kepler_account.bpf.h) make the sample's `inexact_cuts` non-zero: the frame says so rather than
/// pass a wrong split off as exact.
///
/// Entries are never drained: an entry is deleted one interval after its process was reported EXITED
/// (or when a periodic check finds its process gone). Not thread-safe.
/// What the cut has met so far (BpfSource::cut_stats()): the evidence behind "exact", for tests and
/// bench/kepler-collect/cut_probe.
struct CutStats {
    static constexpr size_t kBuckets = 32;
    uint64_t frames = 0;
    uint64_t torn_copies = 0;         // per-CPU copies read while a program was writing that CPU's state
    uint64_t writer_waits = 0;        // frames that waited past the first re-reads for a CPU's writer
    uint64_t max_writer_wait_ns = 0;  // the longest such wait
    uint64_t inexact_cpus = 0;        // CPUs still being written when the patience ran out
    uint64_t lost_marks = 0;          // cut marks that did not fit (KEPLER_DROP_CUT_MARK)
    uint64_t late_charges = 0;        // charges from before a boundary added after its mark (KEPLER_DROP_CUT_LATE)
    /// From the boundary to the read of the per-CPU states, in log2 buckets of µs (0: under 1 µs,
    /// i: [2^(i-1), 2^i) µs).
    std::array<uint64_t, kBuckets> read_delay_us{};
    uint64_t max_read_delay_ns = 0;
};

class BpfSource final : public ProcessSource {
public:
    /// How long the read of the per-CPU states waits for a program still writing one of them.
    static constexpr std::chrono::milliseconds kWriterPatience{100};

    explicit BpfSource(const BpfOptions& options, std::string proc_root = "/proc");
    ~BpfSource() override;

    [[nodiscard]] uint32_t kind() const override { return KEPLERSHM_SOURCE_BPF; }
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] uint64_t metric_mask() const override;
    SourceSample sample() override;

    [[nodiscard]] const BpfProgram& program() const noexcept { return *program_; }

    /// Per CPU: its state as the program last left it, or nullopt when it was still being written after
    /// `patience`.
    using CpuStates = std::vector<std::optional<kepler_cpu_state>>;
    [[nodiscard]] CpuStates read_cpu_states(std::chrono::nanoseconds patience = kWriterPatience) const;
    [[nodiscard]] const CutStats& cut_stats() const noexcept { return cut_stats_; }
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
    /// The program's drop counter `index` (enum kepler_drop_counter), summed over CPUs.
    uint64_t read_drop_counter(uint32_t index) const;
    /// Counts what made this boundary's cut inexact (see the class comment) into `out` and cut_stats_.
    void count_inexact(const CpuStates& states, SourceSample& out);
    /// The marks of the previous boundary (the other parity), read by now.
    void delete_marks(const std::vector<kepler_proc_key>& keys);
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
    uint64_t lost_marks_seen_ = 0;
    uint64_t late_charges_seen_ = 0;
    uint64_t boundary_parity_ = 0;       // the low bit of the next boundary (see cut_boundary_ns)
    mutable CutStats cut_stats_;
    uint64_t samples_ = 0;
};

}  // namespace kepler::collect
