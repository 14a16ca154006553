#include "layout.hpp"

#include <cstring>
#include <limits>

#include "error.hpp"
#include "schema_table.h"

namespace keplershm::detail {
namespace {

constexpr uint64_t kSectionAlign = KEPLERSHM_CACHE_LINE;
constexpr uint32_t kMaxFrameBytes = std::numeric_limits<uint32_t>::max();

uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
    if (a > std::numeric_limits<uint64_t>::max() - b) fail(KEPLERSHM_E_CORRUPT, "{} overflows", what);
    return a + b;
}

uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
    if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) fail(KEPLERSHM_E_CORRUPT, "{} overflows", what);
    return a * b;
}

}  // namespace

keplershm_segment_info info_from_header(const keplershm_header& h) {
    keplershm_segment_info info{};
    info.sz = sizeof info;
    info.header = &h;
    info.generation = h.generation;
    info.segment_size = h.segment_size;
    info.abi_major = h.abi_major;
    info.abi_minor = h.abi_minor;
    info.segment_kind = h.segment_kind;
    info.slot_count = h.slot_count;
    info.process_capacity = h.process_capacity;
    info.cpu_count = h.cpu_count;
    info.zone_count = h.zone_count;
    info.metric_mask = h.metric_mask;
    std::memcpy(info.node_name, h.node_name, sizeof info.node_name);
    std::memcpy(info.cpu_model, h.cpu_model, sizeof info.cpu_model);
    return info;
}

uint32_t min_record_size(uint32_t section_id) {
    switch (section_id) {
    case KEPLERSHM_SECTION_PROCESSES: return sizeof(keplershm_process);
    case KEPLERSHM_SECTION_WORKLOADS: return sizeof(keplershm_workload);
    case KEPLERSHM_SECTION_ZONES: return sizeof(keplershm_zone_sample);
    case KEPLERSHM_SECTION_CPUS: return sizeof(keplershm_cpu_sample);
    case KEPLERSHM_SECTION_STRINGS: return 1;
    case KEPLERSHM_SECTION_UNACCOUNTED: return sizeof(keplershm_unaccounted);
    case KEPLERSHM_SECTION_ESTIMATES: return sizeof(keplershm_estimate);
    case KEPLERSHM_SECTION_GPU_DEVICES: return sizeof(keplershm_gpu_device);
    case KEPLERSHM_SECTION_GPU_USAGE: return sizeof(keplershm_gpu_usage);
    default: return 0;
    }
}

FrameGeometry frame_geometry(const Capacities& caps) {
    FrameGeometry g{};
    uint64_t at = sizeof(keplershm_frame);
    auto place = [&at](uint64_t bytes) {
        const uint64_t offset = align_up(at, kSectionAlign);
        at = offset + bytes;
        return offset;
    };
    g.directory_offset = static_cast<uint32_t>(place(KEPLERSHM_MAX_SECTIONS * sizeof(keplershm_section)));
    // Small fixed sections first, then the variable ones, largest last, so a frame's used bytes
    // stay close together for copy-out.
    const uint64_t unaccounted = place(sizeof(keplershm_unaccounted));
    const uint64_t zones = place(uint64_t{caps.zone_capacity} * sizeof(keplershm_zone_sample));
    const uint64_t cpus = place(uint64_t{caps.cpu_capacity} * sizeof(keplershm_cpu_sample));
    const uint64_t workloads = place(uint64_t{caps.workload_capacity} * sizeof(keplershm_workload));
    const uint64_t gpu_devices = place(uint64_t{caps.gpu_device_capacity} * sizeof(keplershm_gpu_device));
    const uint64_t gpu_usage = place(uint64_t{caps.gpu_usage_capacity} * sizeof(keplershm_gpu_usage));
    const bool estimates_kind = caps.segment_kind == KEPLERSHM_SEGMENT_ESTIMATES;
    const uint64_t estimates = place(estimates_kind ? uint64_t{caps.process_capacity} * sizeof(keplershm_estimate) : 0);
    const uint64_t processes = place(estimates_kind ? 0 : uint64_t{caps.process_capacity} * sizeof(keplershm_process));
    const uint64_t strings = place(caps.string_capacity);
    const uint64_t end = align_up(at, kSectionAlign);
    if (end > kMaxFrameBytes) {
        fail(KEPLERSHM_E_NO_SPACE, "a frame with these capacities needs {} bytes, more than the 4 GiB a frame can hold", end);
    }
    g.unaccounted_offset = static_cast<uint32_t>(unaccounted);
    g.zones_offset = static_cast<uint32_t>(zones);
    g.cpus_offset = static_cast<uint32_t>(cpus);
    g.workloads_offset = static_cast<uint32_t>(workloads);
    g.estimates_offset = static_cast<uint32_t>(estimates);
    g.processes_offset = static_cast<uint32_t>(processes);
    g.strings_offset = static_cast<uint32_t>(strings);
    g.gpu_devices_offset = static_cast<uint32_t>(gpu_devices);
    g.gpu_usage_offset = static_cast<uint32_t>(gpu_usage);
    g.frame_capacity = static_cast<uint32_t>(end);
    return g;
}

uint64_t slots_offset_for_schema(uint32_t schema_count) {
    return align_up(KEPLERSHM_HEADER_SIZE + uint64_t{schema_count} * sizeof(keplershm_field), 4096);
}

uint64_t segment_bytes(const Capacities& caps) {
    const uint64_t slot = KEPLERSHM_SLOT_CONTROL_SIZE + frame_geometry(caps).frame_capacity;
    return slots_offset_for_schema(keplershm_schema_count) + uint64_t{caps.slot_count} * slot;
}

namespace {

/// The header's own sizes and counts: each within the bounds a reader relies on before using it.
void check_header_sizes(const keplershm_header& h, size_t available) {
    if (h.header_size < sizeof h || h.header_size > available) {
        fail(KEPLERSHM_E_CORRUPT, "header_size {} outside [{}, {}]", h.header_size, sizeof h, available);
    }
    if (h.frame_header_size < sizeof(keplershm_frame) || h.frame_header_size % 8 != 0 || h.frame_header_size > (1u << 20)) {
        fail(KEPLERSHM_E_CORRUPT, "frame_header_size {} invalid", h.frame_header_size);
    }
    if (h.section_entry_size < sizeof(keplershm_section) || h.section_entry_size % 4 != 0 || h.section_entry_size > 4096) {
        fail(KEPLERSHM_E_CORRUPT, "section_entry_size {} invalid", h.section_entry_size);
    }
    if (h.max_sections == 0 || h.max_sections > 4096) {
        fail(KEPLERSHM_E_CORRUPT, "max_sections {} invalid", h.max_sections);
    }
    const struct { uint32_t value; uint32_t minimum; const char* name; } records[] = {
        {h.process_record_size, sizeof(keplershm_process), "process_record_size"},
        {h.workload_record_size, sizeof(keplershm_workload), "workload_record_size"},
        {h.zone_record_size, sizeof(keplershm_zone_sample), "zone_record_size"},
        {h.cpu_record_size, sizeof(keplershm_cpu_sample), "cpu_record_size"},
        {h.unaccounted_record_size, sizeof(keplershm_unaccounted), "unaccounted_record_size"},
    };
    for (const auto& r : records) {
        if (r.value < r.minimum || r.value % 8 != 0 || r.value > (1u << 20)) {
            fail(KEPLERSHM_E_CORRUPT, "{} {} invalid (at least {}, a multiple of 8)", r.name, r.value, r.minimum);
        }
    }
    if (h.zone_count > KEPLERSHM_MAX_ZONES) fail(KEPLERSHM_E_CORRUPT, "zone_count {} > {}", h.zone_count, KEPLERSHM_MAX_ZONES);
}

/// Copies the field schema out of the header area (names and units terminated); returns where it ends.
uint64_t copy_schema(const keplershm_header& h, const void* bytes, size_t available, std::vector<keplershm_field>& out) {
    if (h.schema_entry_size < sizeof(keplershm_field) || h.schema_entry_size > 4096) {
        fail(KEPLERSHM_E_CORRUPT, "schema_entry_size {} invalid", h.schema_entry_size);
    }
    if (h.schema_count > 65536) fail(KEPLERSHM_E_CORRUPT, "schema_count {} invalid", h.schema_count);
    const uint64_t schema_end = checked_add(h.schema_offset, checked_mul(h.schema_count, h.schema_entry_size, "schema size"), "schema end");
    if (h.schema_offset < h.header_size || schema_end > available) {
        fail(KEPLERSHM_E_CORRUPT, "schema [{}, {}) outside the {} header bytes", h.schema_offset, schema_end, available);
    }
    out.resize(h.schema_count);
    for (uint32_t i = 0; i < h.schema_count; ++i) {
        keplershm_field& f = out[i];
        std::memcpy(&f, static_cast<const uint8_t*>(bytes) + h.schema_offset + uint64_t{i} * h.schema_entry_size, sizeof f);
        f.name[sizeof f.name - 1] = '\0';
        f.unit[sizeof f.unit - 1] = '\0';
    }
    return schema_end;
}

/// The slot ring of a live segment: inside the mapping, after the schema, slots big enough for a frame
/// header. Returns the largest frame a slot holds.
uint32_t check_ring(const keplershm_header& h, size_t available, uint64_t schema_end) {
    if (h.segment_size > available) {
        fail(KEPLERSHM_E_CORRUPT, "segment_size {} larger than the {} bytes mapped", h.segment_size, available);
    }
    if (h.slot_count < 2 || h.slot_count > (1u << 20)) fail(KEPLERSHM_E_CORRUPT, "slot_count {} invalid", h.slot_count);
    if (h.slot_size % 8 != 0 || h.slot_size < KEPLERSHM_SLOT_CONTROL_SIZE + uint64_t{h.frame_header_size} ||
        h.slot_size - KEPLERSHM_SLOT_CONTROL_SIZE > kMaxFrameBytes) {
        fail(KEPLERSHM_E_CORRUPT, "slot_size {} invalid", h.slot_size);
    }
    if (h.slots_offset % 64 != 0 || h.slots_offset < schema_end) {
        fail(KEPLERSHM_E_CORRUPT, "slots_offset {} overlaps the header or schema", h.slots_offset);
    }
    const uint64_t end = checked_add(h.slots_offset, checked_mul(h.slot_count, h.slot_size, "ring size"), "ring end");
    if (end > h.segment_size) fail(KEPLERSHM_E_CORRUPT, "ring ends at {} beyond segment_size {}", end, h.segment_size);
    return static_cast<uint32_t>(h.slot_size - KEPLERSHM_SLOT_CONTROL_SIZE);
}

}  // namespace

Layout validate_header(const void* bytes, size_t available, bool expect_slots, uint64_t object_bytes) {
    Layout layout{};
    if (available < sizeof(uint64_t) + 2 * sizeof(uint16_t)) {
        fail(KEPLERSHM_E_CORRUPT, "segment too small: {} bytes, a header needs {}", available, KEPLERSHM_HEADER_SIZE);
    }
    // One copy of the header, then every check and every later use reads the copy.
    keplershm_header& h = layout.header;
    std::memcpy(&h, bytes, available < sizeof h ? available : sizeof h);
    if (h.magic != KEPLERSHM_MAGIC) {
        fail(KEPLERSHM_E_BAD_MAGIC, "not a keplershm segment (magic {:#018x})", h.magic);
    }
    if (h.abi_major > KEPLERSHM_ABI_MAJOR || h.abi_major < KEPLERSHM_ABI_OLDEST_MAJOR) {
        fail(KEPLERSHM_E_UNSUPPORTED_MAJOR, "segment ABI {}.{} is not readable by this library (reads majors {} to {})",
             h.abi_major, h.abi_minor, KEPLERSHM_ABI_OLDEST_MAJOR, KEPLERSHM_ABI_MAJOR);
    }
    if (available < sizeof h) {
        fail(KEPLERSHM_E_CORRUPT, "segment too small: {} bytes, a header needs {}", available, sizeof h);
    }
    check_header_sizes(h, available);
    const uint64_t schema_end = copy_schema(h, bytes, available, layout.schema);
    // Text fields must be terminated inside their field so that C readers can use them as strings.
    h.node_name[sizeof h.node_name - 1] = '\0';
    h.cpu_model[sizeof h.cpu_model - 1] = '\0';
    h.platform_meter_id[sizeof h.platform_meter_id - 1] = '\0';
    for (auto& zone : h.zones) zone.name[sizeof zone.name - 1] = '\0';

    layout.frame_header_size = h.frame_header_size;
    layout.slot_count = h.slot_count;
    layout.slot_size = h.slot_size;
    layout.slots_offset = h.slots_offset;
    layout.segment_size = h.segment_size;
    const uint64_t ring_bytes = object_bytes != 0 ? object_bytes : available;
    layout.max_frame_size = expect_slots ? check_ring(h, ring_bytes, schema_end) : kMaxFrameBytes;
    for (uint32_t id = 0; id < KEPLERSHM_MAX_SECTIONS; ++id) layout.min_stride[id] = min_record_size(id);
    return layout;
}

int parse_frame(const uint8_t* frame, size_t available, const Layout& layout, keplershm_view& view) {
    if (available > layout.max_frame_size) available = layout.max_frame_size;
    if (available < layout.frame_header_size) {
        set_last_error(fmt::format("frame area of {} bytes is smaller than a frame header ({})", available, layout.frame_header_size));
        return KEPLERSHM_E_CORRUPT;
    }
    keplershm_frame header;
    std::memcpy(&header, frame, sizeof header);  // one read; the checks below use this copy
    const uint64_t frame_size = header.frame_size;
    if (frame_size < layout.frame_header_size || frame_size > available) {
        set_last_error(fmt::format("frame_size {} outside [{}, {}]", frame_size, layout.frame_header_size, available));
        return KEPLERSHM_E_CORRUPT;
    }
    const uint32_t entry = layout.header.section_entry_size;
    const uint64_t directory_end = uint64_t{layout.frame_header_size} + uint64_t{header.section_count} * entry;
    if (header.section_count > layout.header.max_sections || directory_end > frame_size) {
        set_last_error(fmt::format("section_count {} does not fit the frame", header.section_count));
        return KEPLERSHM_E_CORRUPT;
    }
    view.sequence = header.sequence;
    view.generation = header.generation;
    view.interval_start_ns = header.interval_start_ns;
    view.interval_end_ns = header.interval_end_ns;
    view.flags = header.flags;
    view.source = header.source;
    view.power_source = header.power_source;
    view.frame = reinterpret_cast<const keplershm_frame*>(frame);
    view.base = frame;
    view.frame_size = frame_size;
    view.section_count = 0;
    const uint32_t keep = sizeof view.sections / sizeof view.sections[0];
    for (uint32_t i = 0; i < header.section_count; ++i) {
        keplershm_section s;
        std::memcpy(&s, frame + layout.frame_header_size + uint64_t{i} * entry, sizeof s);
        const uint32_t minimum = s.id < KEPLERSHM_MAX_SECTIONS ? layout.min_stride[s.id] : 0;
        if (minimum == 0) continue;  // a section this reader does not know: skipped, by contract
        const uint64_t end = uint64_t{s.offset} + uint64_t{s.count} * s.stride;
        const bool aligned = s.id == KEPLERSHM_SECTION_STRINGS || (s.offset % 8 == 0 && s.stride % 8 == 0);
        if (s.stride < minimum || !aligned || s.offset < directory_end || end > frame_size) {
            set_last_error(fmt::format("section {} (offset {}, count {}, stride {}) outside the {}-byte frame",
                                       s.id, s.offset, s.count, s.stride, frame_size));
            return KEPLERSHM_E_CORRUPT;
        }
        if (s.id == KEPLERSHM_SECTION_UNACCOUNTED && s.count > 1) {
            set_last_error(fmt::format("unaccounted section has {} records, at most 1", s.count));
            return KEPLERSHM_E_CORRUPT;
        }
        bool duplicate = false;
        for (uint32_t k = 0; k < view.section_count; ++k) duplicate |= view.sections[k].id == s.id;
        if (duplicate) {
            set_last_error(fmt::format("section {} appears twice", s.id));
            return KEPLERSHM_E_CORRUPT;
        }
        if (view.section_count < keep) view.sections[view.section_count++] = s;
    }
    return KEPLERSHM_OK;
}

}  // namespace keplershm::detail
