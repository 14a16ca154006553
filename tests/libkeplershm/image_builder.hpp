// Builds segment images byte by byte from PROTOCOL.md alone (not with the library's writer), so tests can
// present readers with layouts the writer never produces: newer minors, unknown sections, hostile values.
#pragma once

#include <cstring>
#include <vector>

#include "keplershm/keplershm.hpp"

namespace keplershm::test {

struct ImageSpec {
    uint16_t abi_major = KEPLERSHM_ABI_MAJOR;
    uint16_t abi_minor = KEPLERSHM_ABI_MINOR;
    uint32_t header_size = KEPLERSHM_HEADER_SIZE;
    uint32_t frame_header_size = sizeof(keplershm_frame);
    uint32_t process_stride = sizeof(keplershm_process);
    uint32_t slot_count = 2;
    uint32_t processes = 3;
    bool unknown_section = false;  // a section id 12 between the known ones
    uint64_t heartbeat_period_ns = 1'000'000'000;
    uint32_t state = KEPLERSHM_STATE_ACTIVE;
    uint64_t heartbeat_ns = 0;     // in the image writer's clock, whatever that was
    uint64_t heartbeat_count = 0;  // 0: as a writer of ABI 1.0 leaves it
};

/// One published frame (sequence 1) in slot 1 of a two-slot ring.
inline std::vector<uint8_t> build_image(const ImageSpec& spec) {
    const auto schema = library_schema();
    const uint64_t schema_offset = spec.header_size;
    const uint64_t slots_offset = (schema_offset + schema.size() * sizeof(keplershm_field) + 4095) / 4096 * 4096;
    const uint32_t directory = spec.frame_header_size;
    const uint32_t unaccounted_at = directory + 16 * sizeof(keplershm_section);
    const uint32_t unknown_at = unaccounted_at + sizeof(keplershm_unaccounted);
    const uint32_t processes_at = unknown_at + 64;
    const uint32_t frame_size = processes_at + spec.processes * spec.process_stride;
    const uint64_t slot_size = (KEPLERSHM_SLOT_CONTROL_SIZE + frame_size + 63) / 64 * 64;
    std::vector<uint8_t> image(slots_offset + spec.slot_count * slot_size, 0);

    keplershm_header h{};
    h.magic = KEPLERSHM_MAGIC;
    h.abi_major = spec.abi_major;
    h.abi_minor = spec.abi_minor;
    h.header_size = spec.header_size;
    h.segment_size = image.size();
    h.generation = 0x1234;
    h.heartbeat_period_ns = spec.heartbeat_period_ns;
    h.segment_kind = KEPLERSHM_SEGMENT_FRAMES;
    h.slot_count = spec.slot_count;
    h.frame_header_size = spec.frame_header_size;
    h.slot_size = slot_size;
    h.slots_offset = slots_offset;
    h.section_entry_size = sizeof(keplershm_section);
    h.process_record_size = spec.process_stride;
    h.workload_record_size = sizeof(keplershm_workload);
    h.zone_record_size = sizeof(keplershm_zone_sample);
    h.cpu_record_size = sizeof(keplershm_cpu_sample);
    h.unaccounted_record_size = sizeof(keplershm_unaccounted);
    h.process_capacity = spec.processes;
    h.max_sections = 16;
    h.schema_offset = schema_offset;
    h.schema_count = static_cast<uint32_t>(schema.size());
    h.schema_entry_size = sizeof(keplershm_field);
    h.first_sequence = 1;
    h.state = spec.state;
    h.heartbeat_ns = spec.heartbeat_ns;
    h.heartbeat_count = spec.heartbeat_count;
    h.latest_sequence = 1;
    std::memcpy(image.data(), &h, sizeof h);
    std::memcpy(image.data() + schema_offset, schema.data(), schema.size() * sizeof(keplershm_field));

    uint8_t* slot = image.data() + slots_offset + 1 * slot_size;
    const uint64_t published = KEPLERSHM_SEQ_PUBLISHED(1);
    std::memcpy(slot, &published, sizeof published);
    uint8_t* frame = slot + KEPLERSHM_SLOT_CONTROL_SIZE;
    keplershm_frame f{};
    f.sequence = 1;
    f.generation = h.generation;
    f.interval_end_ns = 1'000'000'000;
    f.frame_size = frame_size;
    std::vector<keplershm_section> sections = {
        {KEPLERSHM_SECTION_UNACCOUNTED, sizeof(keplershm_unaccounted), unaccounted_at, 1},
        {KEPLERSHM_SECTION_PROCESSES, spec.process_stride, processes_at, spec.processes}};
    if (spec.unknown_section) sections.insert(sections.begin() + 1, keplershm_section{12, 8, unknown_at, 8});
    f.section_count = static_cast<uint32_t>(sections.size());
    std::memcpy(frame, &f, sizeof f);
    std::memcpy(frame + directory, sections.data(), sections.size() * sizeof(keplershm_section));
    keplershm_unaccounted u{};
    u.cpu_time_ns = 777;
    std::memcpy(frame + unaccounted_at, &u, sizeof u);
    std::memset(frame + unknown_at, 0xee, 64);
    for (uint32_t i = 0; i < spec.processes; ++i) {
        uint8_t* record = frame + processes_at + i * spec.process_stride;
        std::memset(record, 0xab, spec.process_stride);  // fields appended by a newer minor
        keplershm_process p{};
        p.pid = 100 + i;
        p.start_time_ticks = 5000 + i;
        p.cpu_time_ns = 1'000'000ull * (i + 1);
        set_text(p.comm, "proc" + std::to_string(i));
        std::memcpy(record, &p, sizeof p);
    }
    return image;
}

}  // namespace keplershm::test
