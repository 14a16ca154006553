// Aggregation: per-interval shares added into never-decreasing totals per process, container, pod,
// namespace, VM and node. Exited workloads keep their energy in their container and pod until their
// series expire after the retention time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "attribute/attribution.hpp"
#include "keplershm/keplershm.hpp"

namespace kepler::estimate {

/// Energy in microjoules, split by mode. Plain value.
struct EnergyPair {
    uint64_t dynamic_uj = 0;
    uint64_t idle_uj = 0;
};

/// Energy of one entity per zone slot (index into Ledger::zones()), total since the estimator
/// started and for the latest interval. Plain value.
struct EntityEnergy {
    std::vector<EnergyPair> total;
    std::vector<EnergyPair> interval;
    uint64_t last_seen_ns = 0;  // frame interval end (collector's CLOCK_MONOTONIC) when last present
    void add(size_t zone, uint64_t dynamic_uj, uint64_t idle_uj);
};

/// Kepler 0.7's usage counters of one entity, accumulated from per-interval values so that they never
/// decrease (as energy). Which of them are real is Ledger::usage_mask(). Plain value.
struct UsageTotals {
    uint64_t cpu_time_ns = 0;
    uint64_t page_cache_hits = 0;
    uint64_t net_tx_irq = 0, net_rx_irq = 0, block_irq = 0;  // softirq vectors NET_TX, NET_RX, BLOCK
    uint64_t cycles = 0, instructions = 0, cache_misses = 0;
    void add(const keplershm_process& p);
};

/// Processes are keyed by (pid, start time), never pid alone: the protocol's key (keplershm.hpp).
using keplershm::ProcessKey;
using keplershm::ProcessKeyHash;

struct ProcessEntry {
    EntityEnergy energy;
    UsageTotals usage;
    std::string command;
    std::string container_id;  // container-level key it belongs to
    std::string vm_id;
    bool exported = false;     // holds one of the capped per-process series
};

/// Kepler's container labels (system and kernel processes and the unaccounted record get fixed names).
struct ContainerEntry {
    EntityEnergy energy;
    UsageTotals usage;
    std::string container_id, container_name, pod_name, namespace_name, pod_key;
    std::string runtime;  // "docker", "containerd", "cri-o", "podman" or "unknown"
};
struct PodEntry {
    EntityEnergy energy;
    std::string pod_name, namespace_name;
};
struct VmEntry {
    EntityEnergy energy;
    UsageTotals usage;
    std::string vm_id, vm_name;
    std::string hypervisor;  // Kepler's label: "kvm", "xen", "virtualbox", "vmware" or "unknown"
};

/// One whole-node meter of the collector (a BMC's power supply, a PSU, an ACPI meter), as Kepler 0.11's
/// kepler_platform_watts labels it. Plain value.
struct PlatformMeter {
    std::string source;       // "redfish", "pmbus", "acpi", "hwmon"
    std::string bmc_id;       // the collector's BMC (Redfish only)
    std::string chassis_id;   // Redfish: before the '/' of the zone name
    std::string source_id;    // Redfish: after it; else the zone name
    std::string source_type;  // "PowerSupply", "PowerControl", "PowerMeter"
    uint64_t total_uj = 0;    // since the estimator started; never decreases
    double watts = 0;         // latest interval
    bool fresh = false;       // the latest interval had a valid reading (not stale)
};

/// A GPU of the node as the collector describes it (frames of protocol 1.4), for Kepler 0.11's labels
/// (gpu, gpu_uuid, gpu_name, vendor). Plain value.
struct GpuDevice {
    std::string uuid;
    std::string name;
    std::string vendor;     // "nvidia", "amd", "intel", "unknown"
    uint64_t power_limit_mw = 0;
    bool mig = false;       // partitioned into MIG instances
};

struct LedgerOptions {
    uint64_t retention_ns = 300'000'000'000ull;  // drop series of workloads gone this long
    size_t process_series_cap = 1000;           // per-process series exported at most
};

namespace detail {

/// Everything a Ledger holds but its process table, so that copy_for_export() copies all of it (members
/// added later included) and leaves the table behind. Private to Ledger.
struct LedgerTotals {
    LedgerOptions options_;
    std::vector<ZoneKey> zones_;
    std::vector<std::string> node_sources_;  // per zone slot
    EntityEnergy node_;
    std::map<std::string, ContainerEntry> containers_;
    std::map<std::string, PodEntry> pods_;
    std::map<std::string, EntityEnergy> namespaces_;
    std::map<std::string, VmEntry> vms_;
    std::map<std::string, PlatformMeter> platform_meters_;  // by zone name
    std::map<uint32_t, GpuDevice> gpus_;                     // by device index (the GPU zone's socket)
    size_t exported_processes_ = 0;
    uint64_t process_series_refused_ = 0;
    double interval_s_ = 0;
    uint64_t frames_ = 0;
    uint64_t usage_mask_ = 0;
    std::string collector_source_;
    std::string cpu_model_;
    double cpu_usage_ratio_ = 0;
};

}  // namespace detail

/// Not thread-safe: the pipeline thread writes it; exporters on other threads read a copy_for_export()
/// taken under the pipeline's lock.
class Ledger : private detail::LedgerTotals {
public:
    explicit Ledger(LedgerOptions options = {}) { options_ = options; }

    /// A copy for readers (exporters): everything, but of the process table (the largest part, read
    /// only for process series) only the entries holding series, and none without `processes`.
    /// Reading only: add_frame() on the copy would count the left-out processes as new.
    [[nodiscard]] Ledger copy_for_export(bool processes) const;

    /// Adds one attributed frame. `source` is the node power source label (meter or model name).
    void add_frame(const keplershm::FrameView& frame, const Attribution& attribution, const std::string& source);

    [[nodiscard]] const std::vector<ZoneKey>& zones() const noexcept { return zones_; }
    /// Whether a zone slot adds to a workload's total (Kepler: package + dram + gpu + other, or the
    /// platform zone where none of those exists).
    [[nodiscard]] bool counts_in_total(size_t zone) const noexcept;
    [[nodiscard]] const EntityEnergy& node() const noexcept { return node_; }
    [[nodiscard]] const std::vector<std::string>& node_sources() const noexcept { return node_sources_; }
    [[nodiscard]] const std::map<std::string, ContainerEntry>& containers() const noexcept { return containers_; }
    [[nodiscard]] const std::map<std::string, PodEntry>& pods() const noexcept { return pods_; }
    [[nodiscard]] const std::map<std::string, EntityEnergy>& namespaces() const noexcept { return namespaces_; }
    [[nodiscard]] const std::map<std::string, VmEntry>& vms() const noexcept { return vms_; }
    /// The collector's platform zones, each as its own meter (the node's platform zone is their sum).
    [[nodiscard]] const std::map<std::string, PlatformMeter>& platform_meters() const noexcept { return platform_meters_; }
    /// The node's GPUs by device index (the socket of their GPU zone), from the frames' GPU_DEVICES.
    [[nodiscard]] const std::map<uint32_t, GpuDevice>& gpus() const noexcept { return gpus_; }
    [[nodiscard]] const std::unordered_map<ProcessKey, ProcessEntry, ProcessKeyHash>& processes() const noexcept { return processes_; }
    [[nodiscard]] double interval_s() const noexcept { return interval_s_; }
    [[nodiscard]] uint64_t frames() const noexcept { return frames_; }
    [[nodiscard]] uint64_t process_series_refused() const noexcept { return process_series_refused_; }
    /// enum keplershm_metric bits any frame carried: usage families exist only for these.
    [[nodiscard]] uint64_t usage_mask() const noexcept { return usage_mask_; }
    /// The collector's process source of the latest frame: "bpf", "procfs" or "synthetic".
    [[nodiscard]] const std::string& collector_source() const noexcept { return collector_source_; }
    /// The node's CPU model as the collector read it.
    [[nodiscard]] const std::string& cpu_model() const noexcept { return cpu_model_; }
    /// Busy share of the node's CPU time over the latest interval (0 when the frame had no CPU samples).
    [[nodiscard]] double cpu_usage_ratio() const noexcept { return cpu_usage_ratio_; }
    /// Sum of the total (dynamic + idle) over the slots that count in totals.
    [[nodiscard]] uint64_t total_uj(const std::vector<EnergyPair>& by_zone) const noexcept;

private:
    /// A frame's workloads by workload_index (their VM where they run in one) and the system container.
    struct FrameWorkloads {
        std::vector<ContainerEntry*> containers;
        std::vector<VmEntry*> vms;
        ContainerEntry* system;
    };
    std::vector<size_t> add_node_energy(const Attribution& attribution, const std::string& source, uint64_t now);
    FrameWorkloads present_workloads(const keplershm::FrameView& frame, uint64_t now);
    ContainerEntry& fixed_container(const char* name, const char* namespace_name, uint64_t now);
    ProcessEntry& process_entry(const keplershm_process& p);
    void add_process(const keplershm_process& p, size_t index, const Attribution& attribution,
                     const std::vector<size_t>& slots, const FrameWorkloads& workloads, uint64_t now);
    size_t zone_slot(const ZoneKey& zone);
    ContainerEntry& container_for(const keplershm::FrameView& frame, uint32_t workload_index, std::string& vm_id);
    void begin_interval(uint64_t now_ns);
    void expire(uint64_t now_ns);
    void note_node_usage(const keplershm::FrameView& frame);
    void note_platform_meters(const keplershm::FrameView& frame);
    void note_gpus(const keplershm::FrameView& frame);

    std::unordered_map<ProcessKey, ProcessEntry, ProcessKeyHash> processes_;
};

}  // namespace kepler::estimate
