// bpf_source.hpp — per-process metrics from kepler.bpf.c: cumulative kernel counters turned into
// interval deltas, with a running task's time credited up to the interval boundary.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bpf_loader.hpp"
#include "kepler.h"
#include "process_source.hpp"

namespace kepler::collect {

/// How the interval boundary is drawn (see DESIGN.md "Frames tell the truth about time"):
///  1. read every map entry (cumulative totals of slices that ended),
///  2. read each CPU's "running since" state, then take the boundary time T,
///  3. effective total of a process = map total + Σ (T − running_since) over CPUs it runs on now,
///  4. delta = effective − effective at the previous boundary (never negative).
/// A slice that ends between steps 1 and 2 is missing from this interval and lands in the next one;
/// no time is counted twice and none is lost while the process lives.
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

private:
    struct Ledger {
        uint64_t effective_cpu_ns = 0;  // highest effective total published so far
        kepler_proc_stats last{};       // map value at the previous boundary
        bool exit_reported = false;
        uint32_t quiet_samples = 0;     // consecutive samples without activity
    };

    size_t read_entries();
    std::unordered_map<ProcessKey, uint64_t, ProcessKeyHash> read_in_flight(uint64_t& boundary_ns);
    ProcessKey resolve_thread(uint32_t tid) const;
    uint64_t read_drops();
    void delete_entry(const ProcessKey& key);
    void collect_stale(const std::vector<ProcessKey>& quiet);
    ProcessActivity account(const ProcessKey& key, const kepler_proc_stats& stats, uint64_t in_flight_ns,
                            bool in_map, SourceSample& out);

    std::unique_ptr<BpfProgram> program_;
    std::string proc_root_;
    std::unordered_map<ProcessKey, Ledger, ProcessKeyHash> ledger_;
    std::vector<ProcessKey> delete_next_;
    std::unique_ptr<kepler_proc_key[]> keys_;      // batch buffers, sized to the map (untouched until used)
    std::unique_ptr<kepler_proc_stats[]> values_;
    uint64_t drops_seen_ = 0;
    uint64_t samples_ = 0;
};

}  // namespace kepler::collect
