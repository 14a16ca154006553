// Segment and frame geometry: computing it for a writer, and validating it for a reader that must treat
// every byte of the mapping as hostile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "keplershm.h"

namespace keplershm::detail {

/// Capacities asked for by a writer.
struct Capacities {
    uint32_t slot_count;
    uint32_t process_capacity;
    uint32_t workload_capacity;
    uint32_t zone_capacity;
    uint32_t cpu_capacity;
    uint32_t string_capacity;
    uint32_t segment_kind;
    uint32_t gpu_device_capacity = 0;  // 1.4: frames segments only
    uint32_t gpu_usage_capacity = 0;
};

/// Where each section sits inside a slot's frame (writer side; readers use the directory).
struct FrameGeometry {
    uint32_t directory_offset;
    uint32_t unaccounted_offset;
    uint32_t zones_offset;
    uint32_t cpus_offset;
    uint32_t workloads_offset;
    uint32_t estimates_offset;
    uint32_t processes_offset;
    uint32_t strings_offset;
    uint32_t gpu_devices_offset;
    uint32_t gpu_usage_offset;
    uint32_t frame_capacity;  // bytes available for a frame in a slot
};

/// Validated, reader-private copy of a segment header: every later bounds check uses these values,
/// never the mapping (which the writer, or an attacker, may change at any time).
struct Layout {
    keplershm_header header;  // the copy that was validated
    uint64_t segment_size;
    uint64_t slots_offset;
    uint64_t slot_size;
    uint32_t slot_count;
    uint32_t frame_header_size;
    uint32_t max_frame_size;  // slot_size - control line
    uint32_t min_stride[KEPLERSHM_MAX_SECTIONS];  // per section id: smallest acceptable record size
    std::vector<keplershm_field> schema;          // the producer's field schema (text NUL-terminated)
};

inline constexpr uint64_t align_up(uint64_t value, uint64_t alignment) {
    return (value + alignment - 1) / alignment * alignment;
}

/// Frame geometry for the given capacities; throws Error(NO_SPACE) when a frame would exceed 4 GiB.
FrameGeometry frame_geometry(const Capacities& caps);
/// Total bytes of a segment with these capacities (header + schema + slots).
uint64_t segment_bytes(const Capacities& caps);
uint64_t slots_offset_for_schema(uint32_t schema_count);

/// Validates a segment header (live: `bytes` is a copy of the object's first `available` bytes, header
/// and schema at least, and the object has `object_bytes` in all (0: `available`); recording: the
/// SEGMENT record's payload, without slots). Throws Error with a precise message on any violation.
Layout validate_header(const void* bytes, size_t available, bool expect_slots, uint64_t object_bytes = 0);

/// Copies the frame header and directory at `frame` (at most `available` bytes) into `view` and
/// checks every section against `available`. Returns KEPLERSHM_OK or KEPLERSHM_E_CORRUPT
/// (keplershm_last_error_detail says why). Safe on garbage: reads only inside [frame, frame+available).
int parse_frame(const uint8_t* frame, size_t available, const Layout& layout, keplershm_view& view);

/// The segment_info fields that come from a header (configuration and node facts).
keplershm_segment_info info_from_header(const keplershm_header& header);

/// Minimum record size per section id for the readers' supported majors (0: unknown section).
uint32_t min_record_size(uint32_t section_id);

}  // namespace keplershm::detail
