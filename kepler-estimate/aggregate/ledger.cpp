#include "aggregate/ledger.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kepler::estimate {

namespace {

// Kepler 0.7's names for energy outside containers, kept so that dashboards group it the same way.
constexpr const char* kSystem = "system_processes";
constexpr const char* kKernel = "kernel_processes";
constexpr const char* kUnaccounted = "unaccounted";
// Busy time no task's clock covers (interrupts, softirqs, steal, switching): the kernel's own, labelled.
constexpr const char* kKernelTime = "kernel_time";
constexpr const char* kSystemNamespace = "system";
constexpr const char* kKernelNamespace = "kernel";  // Kepler 0.7 puts kernel_processes in namespace "kernel"
// Usage counters that Kepler 0.7 exports; the others in a frame's mask (energy, node CPU) are not per process.
constexpr uint64_t kUsageMetrics = KEPLERSHM_METRIC_CPU_TIME | KEPLERSHM_METRIC_CYCLES | KEPLERSHM_METRIC_INSTRUCTIONS |
                                   KEPLERSHM_METRIC_CACHE_MISSES | KEPLERSHM_METRIC_PAGE_CACHE | KEPLERSHM_METRIC_SOFTIRQ;

const char* source_name(uint32_t source) {
    switch (source) {
    case KEPLERSHM_SOURCE_BPF: return "bpf";
    case KEPLERSHM_SOURCE_PROCFS: return "procfs";
    case KEPLERSHM_SOURCE_SYNTHETIC: return "synthetic";
    default: return "none";
    }
}

void clear_interval(EntityEnergy& e) { std::fill(e.interval.begin(), e.interval.end(), EnergyPair{}); }

template <class Map>
void erase_older(Map& map, uint64_t now_ns, uint64_t retention_ns) {
    std::erase_if(map, [&](const auto& item) {
        const uint64_t seen = item.second.energy.last_seen_ns;
        return now_ns > seen && now_ns - seen > retention_ns;
    });
}

}  // namespace

void EntityEnergy::add(size_t zone, uint64_t dynamic_uj, uint64_t idle_uj) {
    if (total.size() <= zone) {
        total.resize(zone + 1);
        interval.resize(zone + 1);
    }
    total[zone].dynamic_uj += dynamic_uj;
    total[zone].idle_uj += idle_uj;
    interval[zone].dynamic_uj += dynamic_uj;
    interval[zone].idle_uj += idle_uj;
}

// Hardware counters count only when the record says they are valid (a PMU may be shared or absent
// for one process): a missing value adds nothing rather than a fake zero reading.
void UsageTotals::add(const keplershm_process& p) {
    cpu_time_ns += p.cpu_time_ns;
    if (p.flags & KEPLERSHM_PROC_PAGE_CACHE_VALID) page_cache_hits += p.page_cache_hits;
    if (p.flags & KEPLERSHM_PROC_SOFTIRQ_VALID) {
        net_tx_irq += p.softirq[2];
        net_rx_irq += p.softirq[3];
        block_irq += p.softirq[4];
    }
    if (p.flags & KEPLERSHM_PROC_CYCLES_VALID) cycles += p.cycles;
    if (p.flags & KEPLERSHM_PROC_INSTRUCTIONS_VALID) instructions += p.instructions;
    if (p.flags & KEPLERSHM_PROC_CACHE_MISSES_VALID) cache_misses += p.cache_misses;
}

Ledger Ledger::copy_for_export(bool processes) const {
    Ledger out(options_);
    static_cast<LedgerTotals&>(out) = *this;
    if (!processes) return out;
    out.processes_.reserve(exported_processes_);
    for (const auto& [key, p] : processes_) {
        if (p.exported) out.processes_.emplace(key, p);
    }
    return out;
}

size_t Ledger::zone_slot(const ZoneKey& zone) {
    for (size_t i = 0; i < zones_.size(); ++i) {
        if (zones_[i] == zone) return i;
    }
    zones_.push_back(zone);
    node_sources_.emplace_back();
    return zones_.size() - 1;
}

bool Ledger::counts_in_total(size_t zone) const noexcept {
    const bool any_top = std::any_of(zones_.begin(), zones_.end(), [](const ZoneKey& z) { return is_top_level(z.kind); });
    return any_top ? is_top_level(zones_[zone].kind) : zones_[zone].kind == ZoneKind::platform;
}

uint64_t Ledger::total_uj(const std::vector<EnergyPair>& by_zone) const noexcept {
    uint64_t sum = 0;
    for (size_t z = 0; z < by_zone.size() && z < zones_.size(); ++z) {
        if (counts_in_total(z)) sum += by_zone[z].dynamic_uj + by_zone[z].idle_uj;
    }
    return sum;
}

namespace {
/// Fills the names an entry still lacks: a container is often first seen before its runtime or the
/// API server names it (the series then change labels once, from "" to the name).
void learn_names(ContainerEntry& c, const keplershm_workload& w, uint32_t kind) {
    if (c.container_name.empty()) c.container_name = std::string(keplershm::get_text(w.container_name));
    if (kind != KEPLERSHM_WORKLOAD_POD) return;
    if (c.pod_name.empty()) c.pod_name = std::string(keplershm::get_text(w.pod_name));
    if (c.namespace_name.empty()) c.namespace_name = std::string(keplershm::get_text(w.pod_namespace));
}
}  // namespace

ContainerEntry& Ledger::container_for(const keplershm::FrameView& frame, uint32_t workload_index, std::string& vm_id) {
    vm_id.clear();
    const keplershm::Records<keplershm_workload> workloads = frame.workloads();
    uint32_t kind = KEPLERSHM_WORKLOAD_SYSTEM;
    const keplershm_workload* w = nullptr;
    if (workload_index < workloads.size()) {
        w = &workloads[workload_index];
        kind = w->kind;
    }
    std::string key;
    if (w != nullptr && (kind == KEPLERSHM_WORKLOAD_CONTAINER || kind == KEPLERSHM_WORKLOAD_POD)) {
        key = std::string(keplershm::get_text(w->container_id));
        if (key.empty()) key = fmt::format("cgroup-{}", w->cgroup_id);
    } else {
        key = kind == KEPLERSHM_WORKLOAD_KERNEL ? kKernel : kSystem;
        // VMs are system processes at container level (as in Kepler) and also have their own series.
        if (w != nullptr && kind == KEPLERSHM_WORKLOAD_VM) vm_id = std::string(keplershm::get_text(w->vm_id));
    }
    auto [it, fresh] = containers_.try_emplace(key);
    ContainerEntry& c = it->second;
    if (fresh) {
        c.container_id = key;
        if (key == kSystem || key == kKernel) {
            c.container_name = c.pod_name = key;
            c.namespace_name = key == kKernel ? kKernelNamespace : kSystemNamespace;
        } else if (w != nullptr) {
            c.runtime = std::string(keplershm::runtime_name(w->runtime));
            learn_names(c, *w, kind);
            if (kind == KEPLERSHM_WORKLOAD_POD) {
                c.pod_key = std::string(keplershm::get_text(w->pod_uid));
                if (c.pod_key.empty()) c.pod_key = c.namespace_name + "/" + c.pod_name;
            }
        }
    } else if (w != nullptr && key != kSystem && key != kKernel) {
        learn_names(c, *w, kind);  // names the collector learned after the container's first frame
    }
    if (!vm_id.empty()) {
        auto [vm, new_vm] = vms_.try_emplace(vm_id);
        if (new_vm) {
            vm->second.vm_id = vm_id;
            vm->second.vm_name = std::string(keplershm::get_text(w->vm_name));
            vm->second.hypervisor = std::string(keplershm::hypervisor_name(w->runtime));  // Kepler's values: kvm, xen, ...
        }
    }
    return c;
}

void Ledger::begin_interval(uint64_t now_ns) {
    (void)now_ns;
    clear_interval(node_);
    for (auto& [_, c] : containers_) clear_interval(c.energy);
    for (auto& [_, p] : pods_) clear_interval(p.energy);
    for (auto& [_, n] : namespaces_) clear_interval(n);
    for (auto& [_, v] : vms_) clear_interval(v.energy);
    for (auto& [_, p] : processes_) clear_interval(p.energy);
}

void Ledger::expire(uint64_t now_ns) {
    const uint64_t keep = options_.retention_ns;
    erase_older(containers_, now_ns, keep);
    erase_older(pods_, now_ns, keep);
    erase_older(vms_, now_ns, keep);
    std::erase_if(namespaces_, [&](const auto& item) {
        return now_ns > item.second.last_seen_ns && now_ns - item.second.last_seen_ns > keep;
    });
    std::erase_if(processes_, [&](const auto& item) {
        const bool old = now_ns > item.second.energy.last_seen_ns && now_ns - item.second.energy.last_seen_ns > keep;
        if (old && item.second.exported) --exported_processes_;
        return old;
    });
}

void Ledger::note_node_usage(const keplershm::FrameView& frame) {
    usage_mask_ |= frame.header().metric_mask & kUsageMetrics;
    cpu_model_ = std::string(keplershm::get_text(frame.segment().cpu_model));
    collector_source_ = source_name(frame.source());
    uint64_t busy = 0, all = 0;
    for (const keplershm_cpu_sample& c : frame.cpus()) {
        const uint64_t b = c.user_ns + c.nice_ns + c.system_ns + c.irq_ns + c.softirq_ns + c.steal_ns;
        busy += b;
        all += b + c.idle_ns + c.iowait_ns;
    }
    cpu_usage_ratio_ = all > 0 ? static_cast<double>(busy) / static_cast<double>(all) : 0.0;
}

void Ledger::note_platform_meters(const keplershm::FrameView& frame) {
    const keplershm_header& segment = frame.segment();
    const uint32_t zone_count = std::min<uint32_t>(segment.zone_count, KEPLERSHM_MAX_ZONES);
    for (const keplershm_zone_sample& s : frame.zones()) {
        if (s.zone_index >= zone_count || segment.zones[s.zone_index].kind != KEPLERSHM_ZONE_PLATFORM) continue;
        const keplershm_zone_info& info = segment.zones[s.zone_index];
        const std::string name(keplershm::get_text(info.name));
        PlatformMeter& m = platform_meters_[name];
        if (m.source.empty()) {
            m.source = std::string(keplershm::power_source_name(info.power_source));
            m.source_type = std::string(keplershm::meter_detail_name(info.meter_detail));
            m.source_id = name;
            if (info.power_source == KEPLERSHM_POWER_REDFISH) {
                m.bmc_id = std::string(keplershm::get_text(segment.platform_meter_id));
                if (const size_t slash = name.find('/'); slash != std::string::npos) {
                    m.chassis_id = name.substr(0, slash);
                    m.source_id = name.substr(slash + 1);
                }
            }
        }
        m.fresh = (s.flags & KEPLERSHM_ZONE_VALID) != 0;
        if (m.fresh) m.total_uj += s.energy_delta_uj;
        m.watts = m.fresh && interval_s_ > 0 ? static_cast<double>(s.energy_delta_uj) / 1e6 / interval_s_ : 0.0;
    }
}

void Ledger::note_gpus(const keplershm::FrameView& frame) {
    const keplershm_header& segment = frame.segment();
    const uint32_t zone_count = std::min<uint32_t>(segment.zone_count, KEPLERSHM_MAX_ZONES);
    for (const keplershm_gpu_device& d : frame.gpu_devices()) {
        if ((d.flags & KEPLERSHM_GPU_MIG_INSTANCE) || d.zone_index >= zone_count) continue;
        const keplershm_zone_info& zone = segment.zones[d.zone_index];
        if (zone.kind != KEPLERSHM_ZONE_GPU) continue;
        GpuDevice& g = gpus_[zone.socket];
        g.uuid = std::string(keplershm::get_text(d.uuid));
        g.name = std::string(keplershm::get_text(d.name));
        g.vendor = std::string(keplershm::gpu_vendor_name(d.vendor));
        g.power_limit_mw = d.power_limit_mw;
        g.mig = (d.flags & KEPLERSHM_GPU_MIG_ENABLED) != 0;
    }
}

std::vector<size_t> Ledger::add_node_energy(const Attribution& attribution, const std::string& source, uint64_t now) {
    std::vector<size_t> slots;
    for (const ZoneShares& s : attribution.zones) {
        slots.push_back(zone_slot(s.node.zone));
        node_.add(slots.back(), s.node.total_uj - s.node.idle_uj, s.node.idle_uj);
        node_sources_[slots.back()] = s.node.meter.empty() ? source : s.node.meter;  // each zone its own meter
    }
    node_.last_seen_ns = now;
    return slots;
}

Ledger::FrameWorkloads Ledger::present_workloads(const keplershm::FrameView& frame, uint64_t now) {
    // Every workload the collector lists is present, with or without activity this interval.
    const keplershm::Records<keplershm_workload> workloads = frame.workloads();
    FrameWorkloads out{std::vector<ContainerEntry*>(workloads.size()), std::vector<VmEntry*>(workloads.size()), nullptr};
    std::string vm_id;
    for (uint32_t w = 0; w < workloads.size(); ++w) {
        out.containers[w] = &container_for(frame, w, vm_id);
        out.containers[w]->energy.last_seen_ns = now;
        if (!vm_id.empty()) {
            out.vms[w] = &vms_[vm_id];
            out.vms[w]->energy.last_seen_ns = now;
        }
    }
    out.system = &container_for(frame, KEPLERSHM_NO_WORKLOAD, vm_id);
    return out;
}

ContainerEntry& Ledger::fixed_container(const char* name, const char* namespace_name, uint64_t now) {
    ContainerEntry& c = containers_[name];
    if (c.container_id.empty()) {  // new: its fixed labels
        c.container_id = c.container_name = c.pod_name = name;
        c.namespace_name = namespace_name;
    }
    c.energy.last_seen_ns = now;
    return c;
}

// process_entry() and add_process() run once per process per frame: forced inline, as when they were
// add_frame()'s loop body (out of line, BM_EstimateFrame/10000 was 2% slower, measured side by side).
[[gnu::always_inline]] inline ProcessEntry& Ledger::process_entry(const keplershm_process& p) {
    auto [it, fresh] = processes_.try_emplace(ProcessKey{p.pid, p.start_time_ticks});
    if (fresh) {
        it->second.command = std::string(keplershm::get_text(p.comm));
        if (exported_processes_ < options_.process_series_cap) {
            it->second.exported = true;
            ++exported_processes_;
        } else {
            ++process_series_refused_;
        }
    }
    return it->second;
}

[[gnu::always_inline]] inline void Ledger::add_process(const keplershm_process& p, size_t index,
                                                      const Attribution& attribution, const std::vector<size_t>& slots,
                                                      const FrameWorkloads& workloads, uint64_t now) {
    const uint32_t w = p.workload_index;
    ContainerEntry& container = w < workloads.containers.size() ? *workloads.containers[w] : *workloads.system;
    VmEntry* vm = w < workloads.vms.size() ? workloads.vms[w] : nullptr;
    PodEntry* pod = nullptr;
    EntityEnergy* ns = nullptr;
    if (!container.pod_key.empty()) {
        pod = &pods_[container.pod_key];
        pod->pod_name = container.pod_name;
        pod->namespace_name = container.namespace_name;
        pod->energy.last_seen_ns = now;
        ns = &namespaces_[container.namespace_name];
        ns->last_seen_ns = now;
    }
    container.energy.last_seen_ns = now;

    ProcessEntry& proc = process_entry(p);
    proc.container_id = container.container_id;
    proc.vm_id = vm != nullptr ? vm->vm_id : std::string();
    proc.energy.last_seen_ns = now;
    proc.usage.add(p);
    container.usage.add(p);
    if (vm != nullptr) vm->usage.add(p);

    for (size_t z = 0; z < attribution.zones.size(); ++z) {
        const uint64_t dyn = attribution.zones[z].dynamic_uj[index];
        const uint64_t idle = attribution.zones[z].idle_uj[index];
        const size_t slot = slots[z];
        proc.energy.add(slot, dyn, idle);
        container.energy.add(slot, dyn, idle);
        if (pod != nullptr) pod->energy.add(slot, dyn, idle);
        if (ns != nullptr) ns->add(slot, dyn, idle);
        if (vm != nullptr) vm->energy.add(slot, dyn, idle);
    }
}

void Ledger::add_frame(const keplershm::FrameView& frame, const Attribution& attribution, const std::string& source) {
    const uint64_t now = frame.interval_end_ns();
    interval_s_ = static_cast<double>(frame.interval_end_ns() - frame.interval_start_ns()) / 1e9;
    ++frames_;
    begin_interval(now);
    note_node_usage(frame);
    note_platform_meters(frame);
    note_gpus(frame);
    const std::vector<size_t> slots = add_node_energy(attribution, source, now);
    const FrameWorkloads workloads = present_workloads(frame, now);
    ContainerEntry& unaccounted = fixed_container(kUnaccounted, kSystemNamespace, now);
    // Kernel time appears once a frame has some (its source measures it), then stays like unaccounted.
    ContainerEntry* kernel_time = containers_.contains(kKernelTime) || attribution.kernel_cpu_ns > 0
                                      ? &fixed_container(kKernelTime, kKernelNamespace, now)
                                      : nullptr;

    const keplershm::Records<keplershm_process> processes = frame.processes();
    for (uint32_t i = 0; i < processes.size(); ++i) add_process(processes[i], i, attribution, slots, workloads, now);
    for (size_t z = 0; z < attribution.zones.size(); ++z) {
        const ZoneShares& shares = attribution.zones[z];
        unaccounted.energy.add(slots[z], shares.unaccounted_dynamic_uj, shares.unaccounted_idle_uj);
        if (kernel_time != nullptr) kernel_time->energy.add(slots[z], shares.kernel_dynamic_uj, shares.kernel_idle_uj);
    }
    expire(now);
}

}  // namespace kepler::estimate
