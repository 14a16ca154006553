/*
 * keplershm_layout_checks.h — compile-time checks of keplershm_layout.h: every offset of its header table
 * and the size of every record. Included at the end of keplershm_layout.h (never on its own), so every
 * C and C++ translation unit that sees the layout also checks it.
 */
#ifndef KEPLERSHM_LAYOUT_CHECKS_H
#define KEPLERSHM_LAYOUT_CHECKS_H

#ifndef KEPLERSHM_LAYOUT_H
#error "include keplershm_layout.h (or keplershm.h), which includes this file"
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Layout checks: every offset in keplershm_layout.h's header table is asserted.                 */
/* ---------------------------------------------------------------------------------------------- */
#if defined(__cplusplus)
#define KEPLERSHM_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define KEPLERSHM_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
#define KEPLERSHM_CHECK(type, field, off) \
    KEPLERSHM_STATIC_ASSERT(offsetof(struct type, field) == (off), #type "." #field " moved")

KEPLERSHM_CHECK(keplershm_header, magic, 0);
KEPLERSHM_CHECK(keplershm_header, abi_major, 8);
KEPLERSHM_CHECK(keplershm_header, abi_minor, 10);
KEPLERSHM_CHECK(keplershm_header, header_size, 12);
KEPLERSHM_CHECK(keplershm_header, segment_size, 16);
KEPLERSHM_CHECK(keplershm_header, generation, 24);
KEPLERSHM_CHECK(keplershm_header, writer_start_realtime_ns, 32);
KEPLERSHM_CHECK(keplershm_header, writer_start_monotonic_ns, 40);
KEPLERSHM_CHECK(keplershm_header, heartbeat_period_ns, 48);
KEPLERSHM_CHECK(keplershm_header, segment_kind, 56);
KEPLERSHM_CHECK(keplershm_header, writer_version, 60);
KEPLERSHM_CHECK(keplershm_header, slot_count, 64);
KEPLERSHM_CHECK(keplershm_header, frame_header_size, 68);
KEPLERSHM_CHECK(keplershm_header, slot_size, 72);
KEPLERSHM_CHECK(keplershm_header, slots_offset, 80);
KEPLERSHM_CHECK(keplershm_header, section_entry_size, 88);
KEPLERSHM_CHECK(keplershm_header, process_record_size, 92);
KEPLERSHM_CHECK(keplershm_header, workload_record_size, 96);
KEPLERSHM_CHECK(keplershm_header, zone_record_size, 100);
KEPLERSHM_CHECK(keplershm_header, cpu_record_size, 104);
KEPLERSHM_CHECK(keplershm_header, unaccounted_record_size, 108);
KEPLERSHM_CHECK(keplershm_header, process_capacity, 112);
KEPLERSHM_CHECK(keplershm_header, workload_capacity, 116);
KEPLERSHM_CHECK(keplershm_header, zone_capacity, 120);
KEPLERSHM_CHECK(keplershm_header, cpu_capacity, 124);
KEPLERSHM_CHECK(keplershm_header, string_capacity, 128);
KEPLERSHM_CHECK(keplershm_header, max_sections, 132);
KEPLERSHM_CHECK(keplershm_header, schema_offset, 136);
KEPLERSHM_CHECK(keplershm_header, schema_count, 144);
KEPLERSHM_CHECK(keplershm_header, schema_entry_size, 148);
KEPLERSHM_CHECK(keplershm_header, max_segment_bytes, 152);
KEPLERSHM_CHECK(keplershm_header, metric_mask, 160);
KEPLERSHM_CHECK(keplershm_header, cpu_count, 168);
KEPLERSHM_CHECK(keplershm_header, zone_count, 172);
KEPLERSHM_CHECK(keplershm_header, clock_ticks_per_second, 176);
KEPLERSHM_CHECK(keplershm_header, boot_time_realtime_ns, 184);
KEPLERSHM_CHECK(keplershm_header, node_name, 192);
KEPLERSHM_CHECK(keplershm_header, cpu_model, 448);
KEPLERSHM_CHECK(keplershm_header, zones, 576);
KEPLERSHM_CHECK(keplershm_header, first_sequence, 2624);
KEPLERSHM_CHECK(keplershm_header, platform_meter_id, 2632);
KEPLERSHM_CHECK(keplershm_header, gpu_device_capacity, 2696);
KEPLERSHM_CHECK(keplershm_header, gpu_usage_capacity, 2700);
KEPLERSHM_CHECK(keplershm_header, reserved1, 2704);
KEPLERSHM_CHECK(keplershm_header, state, 3840);
KEPLERSHM_CHECK(keplershm_header, writer_cpu_time_ns, 3848);
KEPLERSHM_CHECK(keplershm_header, writer_rss_bytes, 3856);
KEPLERSHM_CHECK(keplershm_header, frames_truncated, 3864);
KEPLERSHM_CHECK(keplershm_header, heartbeat_ns, 3904);
KEPLERSHM_CHECK(keplershm_header, heartbeat_count, 3912);
KEPLERSHM_CHECK(keplershm_header, heartbeat_realtime_ns, 3920);
KEPLERSHM_CHECK(keplershm_header, reserved4, 3928);
KEPLERSHM_CHECK(keplershm_header, futex_word, 3968);
KEPLERSHM_CHECK(keplershm_header, latest_sequence, 3976);
KEPLERSHM_CHECK(keplershm_header, reserved7, 4032);
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_header) == KEPLERSHM_HEADER_SIZE, "header is 4096 bytes");

KEPLERSHM_CHECK(keplershm_zone_info, kind, 32);
KEPLERSHM_CHECK(keplershm_zone_info, meter_detail, 44);
KEPLERSHM_CHECK(keplershm_zone_info, max_energy_range_uj, 48);
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_zone_info) == 64, "zone info is 64 bytes");

KEPLERSHM_CHECK(keplershm_process, start_time_ticks, 8);
KEPLERSHM_CHECK(keplershm_process, cgroup_id, 16);
KEPLERSHM_CHECK(keplershm_process, workload_index, 24);
KEPLERSHM_CHECK(keplershm_process, flags, 28);
KEPLERSHM_CHECK(keplershm_process, comm, 32);
KEPLERSHM_CHECK(keplershm_process, cpu_time_ns, 48);
KEPLERSHM_CHECK(keplershm_process, cycles, 56);
KEPLERSHM_CHECK(keplershm_process, instructions, 64);
KEPLERSHM_CHECK(keplershm_process, cache_misses, 72);
KEPLERSHM_CHECK(keplershm_process, page_cache_hits, 80);
KEPLERSHM_CHECK(keplershm_process, page_cache_misses, 88);
KEPLERSHM_CHECK(keplershm_process, softirq, 96);
KEPLERSHM_CHECK(keplershm_process, reserved, 176);
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_process) == 192, "process record is 192 bytes");

KEPLERSHM_CHECK(keplershm_workload, cgroup_id, 8);
KEPLERSHM_CHECK(keplershm_workload, container_id, 16);
KEPLERSHM_CHECK(keplershm_workload, container_name, 96);
KEPLERSHM_CHECK(keplershm_workload, pod_uid, 160);
KEPLERSHM_CHECK(keplershm_workload, pod_name, 208);
KEPLERSHM_CHECK(keplershm_workload, pod_namespace, 464);
KEPLERSHM_CHECK(keplershm_workload, vm_id, 528);
KEPLERSHM_CHECK(keplershm_workload, vm_name, 592);
KEPLERSHM_CHECK(keplershm_workload, cgroup_path_offset, 720);
KEPLERSHM_CHECK(keplershm_workload, cgroup_path_length, 724);
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_workload) == 768, "workload record is 768 bytes");

KEPLERSHM_CHECK(keplershm_zone_sample, read_time_ns, 8);
KEPLERSHM_CHECK(keplershm_zone_sample, energy_total_uj, 16);
KEPLERSHM_CHECK(keplershm_zone_sample, energy_delta_uj, 24);
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_zone_sample) == 40, "zone sample is 40 bytes");

KEPLERSHM_CHECK(keplershm_cpu_sample, user_ns, 8);
KEPLERSHM_CHECK(keplershm_cpu_sample, steal_ns, 64);
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_cpu_sample) == 80, "cpu sample is 80 bytes");

KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_unaccounted) == 64, "unaccounted record is 64 bytes");
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_section) == 16, "section entry is 16 bytes");

KEPLERSHM_CHECK(keplershm_frame, interval_start_ns, 16);
KEPLERSHM_CHECK(keplershm_frame, process_read_time_ns, 48);
KEPLERSHM_CHECK(keplershm_frame, metric_mask, 56);
KEPLERSHM_CHECK(keplershm_frame, flags, 64);
KEPLERSHM_CHECK(keplershm_frame, section_count, 76);
KEPLERSHM_CHECK(keplershm_frame, frame_size, 80);
KEPLERSHM_CHECK(keplershm_frame, producer_sequence, 88);
KEPLERSHM_CHECK(keplershm_frame, producer_generation, 96);
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_frame) == 256, "frame header is 256 bytes");

KEPLERSHM_CHECK(keplershm_estimate, start_time_ticks, 16);
KEPLERSHM_CHECK(keplershm_estimate, power_watts, 24);
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_estimate) == 64, "estimate record is 64 bytes");

KEPLERSHM_CHECK(keplershm_gpu_device, power_limit_mw, 32);
KEPLERSHM_CHECK(keplershm_gpu_device, active_ns, 40);
KEPLERSHM_CHECK(keplershm_gpu_device, memory_used_bytes, 48);
KEPLERSHM_CHECK(keplershm_gpu_device, uuid, 56);
KEPLERSHM_CHECK(keplershm_gpu_device, name, 152);
KEPLERSHM_CHECK(keplershm_gpu_device, pci_bus_id, 216);
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_gpu_device) == 256, "GPU device record is 256 bytes");
KEPLERSHM_CHECK(keplershm_gpu_usage, start_time_ticks, 8);
KEPLERSHM_CHECK(keplershm_gpu_usage, process_index, 16);
KEPLERSHM_CHECK(keplershm_gpu_usage, busy_ns, 24);
KEPLERSHM_CHECK(keplershm_gpu_usage, memory_bytes, 32);
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_gpu_usage) == 64, "GPU usage record is 64 bytes");
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_slot_control) == KEPLERSHM_SLOT_CONTROL_SIZE, "slot control line");
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_field) == 64, "schema entry is 64 bytes");
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_recording_header) == 64, "recording header is 64 bytes");
KEPLERSHM_STATIC_ASSERT(sizeof(struct keplershm_record_header) == 24, "record header is 24 bytes");

#undef KEPLERSHM_CHECK

#endif /* KEPLERSHM_LAYOUT_CHECKS_H */
