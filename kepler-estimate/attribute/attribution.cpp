#include "attribute/attribution.hpp"

#include <algorithm>
#include <map>

namespace kepler::estimate {

namespace {
__extension__ typedef unsigned __int128 u128;  // energy(uJ) x weight(ns) overflows 64 bits

/// Moves the kernel's share of an unaccounted part to `kernel_part` (by CPU time, exactly conserving).
void carve_kernel(uint64_t& unaccounted_part, uint64_t& kernel_part, uint64_t kernel_cpu, uint64_t unaccounted_cpu) {
    kernel_part = unaccounted_cpu == 0 ? 0 : static_cast<uint64_t>(u128{unaccounted_part} * kernel_cpu / unaccounted_cpu);
    unaccounted_part -= kernel_part;
}

/// Whether device record `device` of the frame is (on) GPU `socket`: its zone is that GPU's.
bool on_gpu(const keplershm::FrameView& frame, const keplershm::Records<keplershm_gpu_device>& devices, uint32_t device, uint32_t socket) {
    if (device >= devices.size()) return false;
    const keplershm_header& segment = frame.segment();
    const uint32_t zone = devices[device].zone_index;
    return zone < std::min<uint32_t>(segment.zone_count, KEPLERSHM_MAX_ZONES) && segment.zones[zone].kind == KEPLERSHM_ZONE_GPU &&
           segment.zones[zone].socket == socket;
}

/// Adds weight `w` of GPU user `u` to its process record, or to the unaccounted record when the frame has
/// no record of it.
void add_user_weight(const keplershm::FrameView& frame, const keplershm_gpu_usage& u, uint64_t w, std::vector<uint64_t>& weights,
                     uint64_t& unaccounted) {
    if (u.process_index < weights.size() && frame.processes()[u.process_index].pid == u.pid) weights[u.process_index] += w;
    else unaccounted += w;
}

// A MIG instance's active time is at most this much (18 minutes) in one frame: a planted segment's figure
// cannot overflow the sum of the weights.
constexpr uint64_t kMaxActiveNs = uint64_t{1} << 40;

/// A MIG-partitioned GPU whose instance records all carry their activity (GPM): each GPU instance's active
/// time, split equally over its users (the driver samples no per-process use under MIG); an active
/// instance without users weighs on the unaccounted record. False (nothing set) when the GPU has no such
/// records, one lacks its activity, or none was active.
bool mig_activity_weights(const keplershm::FrameView& frame, uint32_t socket, std::vector<uint64_t>& weights, uint64_t& unaccounted) {
    const keplershm::Records<keplershm_gpu_device> devices = frame.gpu_devices();
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> instances;  // GPU instance id → (active ns, users)
    for (uint32_t d = 0; d < devices.size(); ++d) {
        if (!(devices[d].flags & KEPLERSHM_GPU_MIG_INSTANCE) || !on_gpu(frame, devices, d, socket)) continue;
        if (!(devices[d].flags & KEPLERSHM_GPU_ACTIVE_VALID)) return false;
        uint64_t& active = instances[devices[d].gpu_instance_id].first;
        active = std::max(active, std::min(devices[d].active_ns, kMaxActiveNs));  // its compute instances say the same
    }
    uint64_t total = 0;
    for (const auto& [id, instance] : instances) total += instance.first;
    if (total == 0) return false;
    auto instance_of = [&](uint32_t device) -> std::pair<uint64_t, uint64_t>* {
        if (!on_gpu(frame, devices, device, socket) || !(devices[device].flags & KEPLERSHM_GPU_MIG_INSTANCE)) return nullptr;
        return &instances[devices[device].gpu_instance_id];
    };
    for (const keplershm_gpu_usage& u : frame.gpu_usage()) {
        if (auto* instance = instance_of(u.device)) ++instance->second;
    }
    for (const keplershm_gpu_usage& u : frame.gpu_usage()) {
        if (const auto* instance = instance_of(u.device)) add_user_weight(frame, u, instance->first / instance->second, weights, unaccounted);
    }
    for (const auto& [id, instance] : instances) {
        if (instance.second == 0) unaccounted += instance.first;
    }
    return true;
}

/// Who used GPU `socket` (the device index of its zone) in the frame, as weights over the process records:
/// busy time where the collector measured it; on a MIG GPU, its instances' activity where measured; else
/// one share per user (a process seen on the GPU without samples). Users the frame has no record of weigh
/// on the unaccounted record. All zero: nobody used it (or the frame says nothing of GPU use): its active
/// energy explains no process.
void gpu_weights(const keplershm::FrameView& frame, uint32_t socket, std::vector<uint64_t>& weights, uint64_t& unaccounted) {
    std::fill(weights.begin(), weights.end(), 0);
    unaccounted = 0;
    const keplershm::Records<keplershm_gpu_device> devices = frame.gpu_devices();
    bool by_busy = false;
    for (const keplershm_gpu_usage& u : frame.gpu_usage()) {
        by_busy |= on_gpu(frame, devices, u.device, socket) && (u.flags & KEPLERSHM_GPU_USE_BUSY_VALID) && u.busy_ns > 0;
    }
    if (!by_busy && mig_activity_weights(frame, socket, weights, unaccounted)) return;
    for (const keplershm_gpu_usage& u : frame.gpu_usage()) {
        if (!on_gpu(frame, devices, u.device, socket)) continue;
        add_user_weight(frame, u, by_busy ? ((u.flags & KEPLERSHM_GPU_USE_BUSY_VALID) ? u.busy_ns : 0) : 1, weights, unaccounted);
    }
}

/// The process records of the containers the kubelet allocated GPU `socket` (or one of its MIG instances)
/// to, one group per container in the frame.
void holder_groups(const keplershm::FrameView& frame, uint32_t socket, const GpuAllocations& allocations,
                   std::vector<std::vector<uint32_t>>& groups) {
    groups.clear();
    const keplershm::Records<keplershm_gpu_device> devices = frame.gpu_devices();
    std::vector<AllocatedContainer> holders;
    for (uint32_t d = 0; d < devices.size(); ++d) {
        const std::vector<AllocatedContainer>* these = on_gpu(frame, devices, d, socket) ? allocations.holders(devices[d]) : nullptr;
        if (these == nullptr) continue;
        for (const AllocatedContainer& h : *these) {
            if (std::find(holders.begin(), holders.end(), h) == holders.end()) holders.push_back(h);
        }
    }
    if (holders.empty()) return;
    groups.resize(holders.size());
    const keplershm::Records<keplershm_workload> workloads = frame.workloads();
    const keplershm::Records<keplershm_process> processes = frame.processes();
    for (uint32_t i = 0; i < processes.size(); ++i) {
        if (processes[i].workload_index >= workloads.size()) continue;
        const keplershm_workload& w = workloads[processes[i].workload_index];
        for (size_t k = 0; k < holders.size(); ++k) {
            if (keplershm::get_text(w.container_name) == holders[k].container_name && keplershm::get_text(w.pod_name) == holders[k].pod_name &&
                keplershm::get_text(w.pod_namespace) == holders[k].pod_namespace) {
                groups[k].push_back(i);
            }
        }
    }
    std::erase_if(groups, [](const std::vector<uint32_t>& g) { return g.empty(); });
}

/// Moves `part` (a GPU's energy no listed user explains) to the holders' processes: the same to each
/// container, within one by CPU time (the same to each process when none used the CPU). Exactly conserving.
void give_to_holders(uint64_t& part, std::span<uint64_t> shares, const std::vector<std::vector<uint32_t>>& groups,
                     std::span<const uint64_t> cpu) {
    if (part == 0 || groups.empty()) return;
    thread_local std::vector<uint64_t> ones, per_group, weights, parts;
    ones.assign(groups.size(), 1);
    per_group.assign(groups.size(), 0);
    uint64_t rest = 0;
    split_energy(part, ones, 0, per_group, rest);
    for (size_t k = 0; k < groups.size(); ++k) {
        weights.clear();
        uint64_t busy = 0;
        for (const uint32_t i : groups[k]) busy += cpu[i];
        for (const uint32_t i : groups[k]) weights.push_back(busy > 0 ? cpu[i] : 1);
        parts.assign(weights.size(), 0);
        split_energy(per_group[k], weights, 0, parts, rest);
        for (size_t j = 0; j < groups[k].size(); ++j) shares[groups[k][j]] += parts[j];
    }
    part = rest;  // 0: every group has a process with weight
}

}  // namespace

std::optional<IdlePolicy> idle_policy_from_string(std::string_view text) noexcept {
    if (text == "cpu-share") return IdlePolicy::cpu_share;
    if (text == "even") return IdlePolicy::even;
    if (text == "none") return IdlePolicy::none;
    return std::nullopt;
}

std::string_view to_string(IdlePolicy policy) noexcept {
    switch (policy) {
        case IdlePolicy::cpu_share: return "cpu-share";
        case IdlePolicy::even: return "even";
        case IdlePolicy::none: return "none";
    }
    return "?";
}

void split_energy(uint64_t energy, std::span<const uint64_t> weights, uint64_t unaccounted_weight,
                  std::span<uint64_t> parts, uint64_t& unaccounted_part) {
    u128 total = unaccounted_weight;
    size_t heaviest = weights.size();  // index, or weights.size() for the unaccounted record
    uint64_t heaviest_weight = unaccounted_weight;
    for (size_t i = 0; i < weights.size(); ++i) {
        total += weights[i];
        if (weights[i] > heaviest_weight) {
            heaviest_weight = weights[i];
            heaviest = i;
        }
    }
    if (total == 0) {
        std::fill(parts.begin(), parts.end(), 0);
        unaccounted_part = energy;  // nobody was active: no process explains this energy
        return;
    }
    uint64_t given = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
        parts[i] = static_cast<uint64_t>(u128{energy} * weights[i] / total);
        given += parts[i];
    }
    unaccounted_part = static_cast<uint64_t>(u128{energy} * unaccounted_weight / total);
    given += unaccounted_part;
    const uint64_t rounding = energy - given;  // < number of holders
    if (heaviest == weights.size()) unaccounted_part += rounding;
    else parts[heaviest] += rounding;
}

uint64_t kernel_cpu_time_ns(const keplershm::FrameView& frame) noexcept {
    const keplershm_unaccounted* unaccounted = frame.unaccounted();
    if (unaccounted == nullptr) return 0;
    uint64_t kernel = 0;
    for (const keplershm_cpu_sample& c : frame.cpus()) kernel += c.irq_ns + c.softirq_ns + c.steal_ns;
    const uint64_t left_out = std::min(unaccounted->truncated_cpu_time_ns, unaccounted->cpu_time_ns);
    return std::min(kernel, unaccounted->cpu_time_ns - left_out);
}

namespace {

/// A GPU zone: active energy by GPU use (MODELS.md), never by CPU time; idle as the policy says, with GPU
/// use in place of CPU time for cpu-share.
void attribute_gpu(const keplershm::FrameView& frame, IdlePolicy policy, uint64_t dynamic, uint64_t idle,
                   const GpuAllocations* allocations, std::span<const uint64_t> cpu, ZoneShares& s) {
    thread_local std::vector<uint64_t> weights, ones;
    thread_local std::vector<std::vector<uint32_t>> holders;
    weights.resize(s.dynamic_uj.size());
    uint64_t unaccounted_weight = 0;
    gpu_weights(frame, s.node.zone.socket, weights, unaccounted_weight);
    split_energy(dynamic, weights, unaccounted_weight, s.dynamic_uj, s.unaccounted_dynamic_uj);
    switch (policy) {
        case IdlePolicy::cpu_share: split_energy(idle, weights, unaccounted_weight, s.idle_uj, s.unaccounted_idle_uj); break;
        case IdlePolicy::even:
            ones.assign(s.idle_uj.size(), 1);
            split_energy(idle, ones, 0, s.idle_uj, s.unaccounted_idle_uj);
            break;
        case IdlePolicy::none:
            std::fill(s.idle_uj.begin(), s.idle_uj.end(), 0);
            s.unaccounted_idle_uj = 0;
            s.node_idle_uj = idle;
            break;
    }
    // What no listed user explains (users the frame has no record of, or none listed) is the energy of the
    // containers the kubelet allocated the GPU to, where it did.
    if (allocations == nullptr || (s.unaccounted_dynamic_uj == 0 && s.unaccounted_idle_uj == 0)) return;
    holder_groups(frame, s.node.zone.socket, *allocations, holders);
    give_to_holders(s.unaccounted_dynamic_uj, s.dynamic_uj, holders, cpu);
    give_to_holders(s.unaccounted_idle_uj, s.idle_uj, holders, cpu);
}

}  // namespace

void attribute(const keplershm::FrameView& frame, const NodeEnergy& node, IdlePolicy policy, Attribution& out,
               const GpuAllocations* allocations) {
    const keplershm::Records<keplershm_process> processes = frame.processes();
    const size_t n = processes.size();
    const keplershm_unaccounted* unaccounted = frame.unaccounted();
    const uint64_t unaccounted_cpu = unaccounted != nullptr ? unaccounted->cpu_time_ns : 0;
    const uint64_t kernel_cpu = kernel_cpu_time_ns(frame);
    out.kernel_cpu_ns = kernel_cpu;

    // Usage metrics, read once per frame. thread_local: buffers survive across frames without making
    // the function stateful for callers.
    thread_local std::vector<uint64_t> cpu, misses, ones;
    cpu.resize(n);
    misses.resize(n);
    ones.assign(n, 1);
    uint64_t miss_total = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const keplershm_process& p = processes[i];
        cpu[i] = p.cpu_time_ns;
        misses[i] = (p.flags & KEPLERSHM_PROC_CACHE_MISSES_VALID) ? p.cache_misses : 0;
        miss_total += misses[i];
    }
    const bool frame_has_misses = (frame.header().metric_mask & KEPLERSHM_METRIC_CACHE_MISSES) != 0 && miss_total > 0;

    out.zones.resize(node.zones.size());
    for (size_t z = 0; z < node.zones.size(); ++z) {
        ZoneShares& s = out.zones[z];
        s.node = node.zones[z];
        const uint64_t idle = std::min(s.node.idle_uj, s.node.total_uj);
        const uint64_t dynamic = s.node.total_uj - idle;
        s.dynamic_uj.resize(n);
        s.idle_uj.resize(n);
        s.by_cache_misses = s.node.zone.kind == ZoneKind::dram && frame_has_misses;
        s.node_idle_uj = 0;
        s.kernel_idle_uj = 0;
        s.kernel_dynamic_uj = 0;
        if (s.node.zone.kind == ZoneKind::gpu) {
            attribute_gpu(frame, policy, dynamic, idle, allocations, cpu, s);
            continue;
        }
        // The unaccounted record has CPU time but no counters: by cache misses it weighs nothing.
        if (s.by_cache_misses) split_energy(dynamic, misses, 0, s.dynamic_uj, s.unaccounted_dynamic_uj);
        else split_energy(dynamic, cpu, unaccounted_cpu, s.dynamic_uj, s.unaccounted_dynamic_uj);
        if (!s.by_cache_misses) carve_kernel(s.unaccounted_dynamic_uj, s.kernel_dynamic_uj, kernel_cpu, unaccounted_cpu);
        switch (policy) {
            case IdlePolicy::cpu_share:
                split_energy(idle, cpu, unaccounted_cpu, s.idle_uj, s.unaccounted_idle_uj);
                carve_kernel(s.unaccounted_idle_uj, s.kernel_idle_uj, kernel_cpu, unaccounted_cpu);
                break;
            case IdlePolicy::even: split_energy(idle, ones, 0, s.idle_uj, s.unaccounted_idle_uj); break;
            case IdlePolicy::none:
                std::fill(s.idle_uj.begin(), s.idle_uj.end(), 0);
                s.unaccounted_idle_uj = 0;
                s.node_idle_uj = idle;
                break;
        }
    }
}

}  // namespace kepler::estimate
