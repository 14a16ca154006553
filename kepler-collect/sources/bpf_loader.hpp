// bpf_loader.hpp — loads kepler.bpf.c through its skeleton, choosing the attach flavour at load time
// (tp_btf → raw_tp → tracepoint), and wires the hardware counters into its perf_event_array maps.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sources/perf_events.hpp"

struct kepler_bpf;  // the generated skeleton (kepler.skel.h)
struct bpf_link;
struct bpf_program;

namespace kepler::collect {

enum class AttachMode { tp_btf, raw_tp, tracepoint };

[[nodiscard]] const char* to_string(AttachMode mode) noexcept;
[[nodiscard]] std::optional<AttachMode> parse_attach_mode(std::string_view text) noexcept;

/// The largest --bpf-max-processes: the cut marks map holds two entries per process.
inline constexpr uint32_t kMaxProcessEntries = 1u << 24;

struct BpfOptions {
    std::optional<AttachMode> attach;  // nullopt: try tp_btf, raw_tp, tracepoint in that order
    uint32_t max_processes = 16384;    // entries of the `processes` map
    uint32_t max_threads = 32768;      // entries of the `threads` LRU map (per-thread baselines)
    bool hardware_counters = true;     // open cycles/instructions/LLC misses where a PMU exists
};

/// A loaded and attached program. Destroying it detaches everything. Not thread-safe.
class BpfProgram {
public:
    /// Throws CollectError naming what failed for each flavour tried.
    static std::unique_ptr<BpfProgram> load(const BpfOptions& options);
    BpfProgram(const BpfProgram&) = delete;
    BpfProgram& operator=(const BpfProgram&) = delete;
    ~BpfProgram();

    [[nodiscard]] AttachMode mode() const noexcept { return mode_; }
    [[nodiscard]] bool page_cache_attached() const noexcept { return page_cache_; }
    [[nodiscard]] const HardwareCounters& counters() const noexcept { return counters_; }
    [[nodiscard]] uint32_t possible_cpus() const noexcept { return possible_cpus_; }
    [[nodiscard]] uint32_t max_processes() const noexcept { return max_processes_; }
    [[nodiscard]] int processes_fd() const;
    [[nodiscard]] int cpu_states_fd() const;
    [[nodiscard]] int drops_fd() const;
    [[nodiscard]] int cut_marks_fd() const;
#ifdef KEPLER_CUT_STATS
    /// Per CPU struct kepler_cut_stats (built with -DKEPLERSHM_BPF_CUT_STATS=ON only).
    [[nodiscard]] int cut_stats_fd() const;
#endif
    /// Tells the program where the next frame boundary lies (bpf_ktime_get_ns() time; see
    /// cut_boundary_ns in kepler.bpf.c). Throws CollectError when the kernel refuses the update.
    void publish_boundary(uint64_t boundary_ns);
    /// Ids of the attached programs (bpftool prog show id N; run time with kernel.bpf_stats_enabled).
    [[nodiscard]] std::vector<uint32_t> program_ids() const;
    /// What this kernel or machine could not provide ("page cache: ...", "cycles: no PMU ...").
    [[nodiscard]] const std::vector<std::string>& degraded() const noexcept { return degraded_; }

private:
    BpfProgram() = default;
    /// Opens, loads and attaches the skeleton in one flavour; returns why it failed ("" = attached).
    std::string try_attach(AttachMode mode);
    /// Before load: constants the program reads and map sizes.
    void size_maps(kepler_bpf* skel) const;
    /// Marks the hooks of `mode` (and the repair program) for loading; returns why not ("" = done).
    std::string choose_programs(kepler_bpf* skel, AttachMode mode, std::vector<bpf_program*>& chosen) const;
    /// After load: each CPU's open hardware counters into the program's perf-event arrays.
    void connect_counters(kepler_bpf* skel) const;

    kepler_bpf* skeleton_ = nullptr;
    std::vector<bpf_link*> links_;
    AttachMode mode_ = AttachMode::tp_btf;
    bool page_cache_ = false;
    uint32_t possible_cpus_ = 0;
    uint32_t max_processes_ = 0;
    uint32_t max_threads_ = 0;
    HardwareCounters counters_;
    std::vector<std::string> degraded_;
};

/// Empty when the basic prerequisites for eBPF hold, else why not (used for --source auto's reason).
[[nodiscard]] std::string bpf_prerequisite_problem();

}  // namespace kepler::collect
