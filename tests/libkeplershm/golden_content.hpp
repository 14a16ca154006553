// The content of the committed golden files (golden/abi-<major>.<minor>/): written by make_golden.cpp,
// checked by golden_test.cpp. Each released layout keeps its files so every later reader is tested on them.
#pragma once

#include "keplershm/keplershm.hpp"

namespace keplershm::golden {

inline constexpr int kFrames = 3;

inline WriterOptions options() {
    WriterOptions o;
    o.slot_count = 4;
    o.process_capacity = 4;
    o.workload_capacity = 2;
    o.zone_capacity = 2;
    o.cpu_capacity = 2;
    o.string_capacity = 128;
    o.node_name = "golden-node";
    o.cpu_model = "Golden CPU @ 2.00GHz";
    o.cpu_count = 2;
    o.metric_mask = KEPLERSHM_METRIC_CPU_TIME | KEPLERSHM_METRIC_NODE_CPU | KEPLERSHM_METRIC_ENERGY;
    o.zones.resize(2);
    set_text(o.zones[0].name, "package-0");
    o.zones[0].kind = KEPLERSHM_ZONE_PACKAGE;
    o.zones[0].power_source = KEPLERSHM_POWER_RAPL;
    o.zones[0].max_energy_range_uj = 262143328850ull;
    set_text(o.zones[1].name, "dram-0");
    o.zones[1].kind = KEPLERSHM_ZONE_DRAM;
    o.zones[1].power_source = KEPLERSHM_POWER_RAPL;
    o.gpu_device_capacity = 2;  // 1.4
    o.gpu_usage_capacity = 2;
    return o;
}

/// 1.4: one GPU (its energy in zone 1, to keep the zone list of older layouts) used by process 200.
inline void fill_gpus(Draft& d) {
    keplershm_gpu_device g{};
    g.zone_index = 1;
    g.vendor = KEPLERSHM_GPU_NVIDIA;
    g.flags = KEPLERSHM_GPU_USAGE_VALID;
    g.parent = g.gpu_instance_id = g.compute_instance_id = 0xffffffffu;
    g.power_limit_mw = 700'000;
    set_text(g.uuid, "GPU-00000000-1111-2222-3333-444444444444");
    set_text(g.name, "Golden GPU");
    set_text(g.pci_bus_id, "00000000:17:00.0");
    d.add_gpu_device(g);
    keplershm_gpu_usage u{};
    u.pid = 200;
    u.start_time_ticks = 3000;
    u.process_index = 0;
    u.flags = KEPLERSHM_GPU_USE_COMPUTE | KEPLERSHM_GPU_USE_BUSY_VALID;
    u.busy_ns = d.sequence() * 250'000'000ull;
    u.memory_bytes = 1ull << 30;
    d.add_gpu_usage(u);
}

inline void fill(Draft& d) {
    const uint64_t n = d.sequence();
    keplershm_frame& f = d.frame();
    f.interval_start_ns = n * 1'000'000'000ull;
    f.interval_end_ns = f.interval_start_ns + 1'000'000'000ull;
    f.source = KEPLERSHM_SOURCE_SYNTHETIC;
    f.power_source = KEPLERSHM_POWER_RAPL;
    f.metric_mask = options().metric_mask;
    keplershm_workload w{};
    w.kind = KEPLERSHM_WORKLOAD_POD;
    w.runtime = KEPLERSHM_RUNTIME_CONTAINERD;
    set_text(w.container_id, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    set_text(w.pod_name, "golden-pod");
    set_text(w.pod_namespace, "default");
    set_text(w.container_name, "app");
    const auto path = d.add_string("/kubepods.slice/golden");
    w.cgroup_path_offset = path.value_or(0);
    w.cgroup_path_length = 22;
    d.add_workload(w);
    for (uint32_t i = 0; i < 2; ++i) {
        keplershm_process p{};
        p.pid = p.tgid = 200 + i;
        p.start_time_ticks = 3000 + i;
        p.workload_index = i == 0 ? 0 : KEPLERSHM_NO_WORKLOAD;
        set_text(p.comm, i == 0 ? "golden-app" : "golden-host");
        p.cpu_time_ns = n * 100'000'000ull + i;
        d.add_process(p);
        keplershm_cpu_sample c{};
        c.cpu = i;
        c.user_ns = n * 10 + i;
        c.idle_ns = 900'000'000;
        d.add_cpu(c);
        keplershm_zone_sample z{};
        z.zone_index = i;
        z.flags = KEPLERSHM_ZONE_VALID;
        z.energy_delta_uj = (i + 1) * 5'000'000ull;
        z.energy_total_uj = n * z.energy_delta_uj;
        z.read_time_ns = f.interval_end_ns;
        d.add_zone(z);
    }
    d.unaccounted().cpu_time_ns = 7;
    if (n == 2) {  // 1.5: the second frame's cut was inexact on one CPU
        f.flags |= KEPLERSHM_FRAME_CUT_INEXACT;
        d.unaccounted().inexact_cuts = 1;
    }
    fill_gpus(d);
}

}  // namespace keplershm::golden
