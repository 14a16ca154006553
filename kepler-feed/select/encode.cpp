#include "select/encode.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "keplershm/keplershm.hpp"

namespace kepler::feed {

namespace {

template <class T>
T load(const uint8_t* at) {
    T value;
    std::memcpy(&value, at, sizeof value);
    return value;
}

std::vector<uint32_t> all_rows(uint32_t count) {
    std::vector<uint32_t> rows(count);
    std::iota(rows.begin(), rows.end(), 0u);
    return rows;
}

/// The schema entry's element size, or 0 for a type this feed does not know (a newer minor's).
uint32_t element_size(const keplershm_field& field) {
    switch (field.type) {
        case KEPLERSHM_TYPE_U32: return 4;
        case KEPLERSHM_TYPE_U64:
        case KEPLERSHM_TYPE_F64: return 8;
        case KEPLERSHM_TYPE_CHAR: return 1;
        default: return 0;
    }
}

/// One column over `rows`. The schema comes from the segment (untrusted): a field that does not fit
/// the section's stride is left out rather than read out of bounds.
void encode_column(const Snapshot::Section& section, const keplershm_field& field, const std::vector<uint32_t>& rows,
                   const std::vector<uint32_t>* remap, v1::Column& out) {
    const uint32_t width = field.type == KEPLERSHM_TYPE_CHAR ? 1 : field.count;
    const uint64_t bytes = static_cast<uint64_t>(element_size(field)) * field.count;
    if (bytes == 0 || static_cast<uint64_t>(field.offset) + bytes > section.stride) return;
    out.set_name(utf8(keplershm::get_text(field.name)));
    out.set_width(width);
    for (const uint32_t row : rows) {
        const uint8_t* at = section.bytes.data() + static_cast<size_t>(row) * section.stride + field.offset;
        for (uint32_t i = 0; i < width; ++i) {
            switch (field.type) {
                case KEPLERSHM_TYPE_U32: {
                    uint32_t value = load<uint32_t>(at + 4 * i);
                    if (remap != nullptr) value = value < remap->size() ? (*remap)[value] : KEPLERSHM_NO_WORKLOAD;
                    out.add_u32(value);
                    break;
                }
                case KEPLERSHM_TYPE_U64: out.add_u64(load<uint64_t>(at + 8 * i)); break;
                case KEPLERSHM_TYPE_F64: out.add_f64(load<double>(at + 8 * i)); break;
                default: out.add_text(std::string(reinterpret_cast<const char*>(at), strnlen(reinterpret_cast<const char*>(at), field.count)));
            }
        }
    }
}

void fill_header(const keplershm_frame& frame, v1::FrameHeader& out) {
    out.set_interval_start_ns(frame.interval_start_ns);
    out.set_interval_end_ns(frame.interval_end_ns);
    out.set_interval_start_realtime_ns(frame.interval_start_realtime_ns);
    out.set_interval_end_realtime_ns(frame.interval_end_realtime_ns);
    out.set_process_read_time_ns(frame.process_read_time_ns);
    out.set_metric_mask(frame.metric_mask);
    out.set_flags(frame.flags);
    out.set_source(frame.source);
    out.set_power_source(frame.power_source);
    out.set_processes_seen(frame.processes_seen);
    out.set_producer_sequence(frame.producer_sequence);
    out.set_producer_generation(frame.producer_generation);
}

/// The header's zones (the count is untrusted: at most the array's).
void add_zones(const keplershm_header& h, google::protobuf::RepeatedPtrField<v1::Zone>& out) {
    for (uint32_t i = 0; i < std::min<uint32_t>(h.zone_count, KEPLERSHM_MAX_ZONES); ++i) {
        const keplershm_zone_info& z = h.zones[i];
        v1::Zone* zone = out.Add();
        zone->set_index(i);
        zone->set_name(utf8(keplershm::get_text(z.name)));
        zone->set_kind(z.kind);
        zone->set_socket(z.socket);
        zone->set_power_source(z.power_source);
        zone->set_max_energy_range_uj(z.max_energy_range_uj);
    }
}

}  // namespace

std::string utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        bool valid = n != 0 && i + n <= text.size();
        for (size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
        if (valid) {
            out.append(text.substr(i, n));
            i += n;
        } else {
            out += '?';
            ++i;
        }
    }
    return out;
}

void fill_segment(const SegmentFacts& facts, v1::Segment& out) {
    const keplershm_header& h = facts.header;
    out.set_generation(h.generation);
    out.set_abi_major(h.abi_major);
    out.set_abi_minor(h.abi_minor);
    out.set_segment_kind(h.segment_kind);
    out.set_node_name(utf8(keplershm::get_text(h.node_name)));
    out.set_cpu_model(utf8(keplershm::get_text(h.cpu_model)));
    out.set_cpu_count(h.cpu_count);
    out.set_metric_mask(h.metric_mask);
    out.set_clock_ticks_per_second(h.clock_ticks_per_second);
    out.set_boot_time_realtime_ns(h.boot_time_realtime_ns);
    out.set_writer_start_realtime_ns(h.writer_start_realtime_ns);
    out.set_heartbeat_period_ns(h.heartbeat_period_ns);
    out.set_first_sequence(h.first_sequence);
    out.set_slot_count(h.slot_count);
    out.set_frame_header_size(h.frame_header_size);
    out.set_writer_version(h.writer_version);
    add_zones(h, *out.mutable_zones());
    for (const keplershm_field& f : facts.schema) {
        v1::Field* field = out.add_schema();
        field->set_name(utf8(keplershm::get_text(f.name)));
        field->set_unit(utf8(keplershm::get_text(f.unit)));
        field->set_record_type(f.record_type);
        field->set_type(f.type);
        field->set_offset(f.offset);
        field->set_count(f.count);
        field->set_size(f.size);
    }
}

FrameEncoder::FrameEncoder(Selection selection) : selection_(std::move(selection)) {
    for (const SectionPlan& plan : selection_.sections)
        if (plan.kind.id == KEPLERSHM_SECTION_ESTIMATES) estimates_plan_ = plan;
}

bool FrameEncoder::workload_matches(const keplershm_workload& w) const {
    const auto in = [](const std::unordered_set<std::string>& set, std::string_view value) {
        return !value.empty() && set.count(std::string(value)) != 0;
    };
    const Selection& s = selection_;
    return (s.containers.empty() || in(s.containers, keplershm::get_text(w.container_id)) ||
            in(s.containers, keplershm::get_text(w.container_name))) &&
           (s.pods.empty() || in(s.pods, keplershm::get_text(w.pod_name)) || in(s.pods, keplershm::get_text(w.pod_uid))) &&
           (s.namespaces.empty() || in(s.namespaces, keplershm::get_text(w.pod_namespace)));
}

FrameEncoder::Rows FrameEncoder::plan_rows(const Snapshot& snapshot) const {
    Rows rows;
    const Snapshot::Section* processes = snapshot.find(KEPLERSHM_SECTION_PROCESSES);
    const Snapshot::Section* workloads = snapshot.find(KEPLERSHM_SECTION_WORKLOADS);
    const uint32_t process_count = processes ? processes->count : 0;
    rows.workloads = all_rows(workloads ? workloads->count : 0);
    rows.processes = all_rows(process_count);
    // The library refused strides below the record size of this major: whole structs can be read.
    if (selection_.filters_workloads()) {
        rows.remap = true;
        rows.workloads.clear();
        rows.workload_map.assign(workloads ? workloads->count : 0, KEPLERSHM_NO_WORKLOAD);
        for (uint32_t i = 0; workloads && i < workloads->count; ++i) {
            if (!workload_matches(load<keplershm_workload>(workloads->bytes.data() + static_cast<size_t>(i) * workloads->stride))) continue;
            rows.workload_map[i] = static_cast<uint32_t>(rows.workloads.size());
            rows.workloads.push_back(i);
        }
        std::erase_if(rows.processes, [&](uint32_t row) {
            const uint32_t w = load<uint32_t>(processes->bytes.data() + static_cast<size_t>(row) * processes->stride +
                                              offsetof(keplershm_process, workload_index));
            return w >= rows.workload_map.size() || rows.workload_map[w] == KEPLERSHM_NO_WORKLOAD;
        });
    }
    if (selection_.top_n != 0 && rows.processes.size() > selection_.top_n) {
        const auto cpu = [&](uint32_t row) {
            return load<uint64_t>(processes->bytes.data() + static_cast<size_t>(row) * processes->stride +
                                  offsetof(keplershm_process, cpu_time_ns));
        };
        std::vector<uint32_t> order = rows.processes;
        // Ties broken by frame order, so the same frame always gives the same rows.
        std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return cpu(a) > cpu(b); });
        order.resize(selection_.top_n);
        std::sort(order.begin(), order.end());  // back to frame order
        rows.processes = std::move(order);
    }
    return rows;
}

void FrameEncoder::encode_section(const Snapshot& snapshot, const SectionPlan& plan, const Rows& rows,
                                  v1::Section& out) const {
    const Snapshot::Section& section = *snapshot.find(plan.kind.id);
    out.set_name(plan.kind.name);
    out.set_id(plan.kind.id);
    out.set_stride(section.stride);
    if (plan.kind.record_type == 0) {  // strings: whole, so that offsets in records stay valid
        out.set_rows(section.count);
        out.set_data(section.bytes.data(), section.bytes.size());
        return;
    }
    const std::vector<uint32_t> all = all_rows(section.count);
    const std::vector<uint32_t>& kept = plan.kind.id == KEPLERSHM_SECTION_PROCESSES   ? rows.processes
                                        : plan.kind.id == KEPLERSHM_SECTION_WORKLOADS ? rows.workloads
                                                                                      : all;
    out.set_rows(static_cast<uint32_t>(kept.size()));
    for (const keplershm_field& field : snapshot.segment->schema) {
        if (field.record_type != plan.kind.record_type) continue;
        const std::string_view name = keplershm::get_text(field.name);
        if (!plan.fields.empty() && std::find(plan.fields.begin(), plan.fields.end(), name) == plan.fields.end()) continue;
        const bool remap = rows.remap && plan.kind.id == KEPLERSHM_SECTION_PROCESSES && name == "workload_index";
        v1::Column column;
        encode_column(section, field, kept, remap ? &rows.workload_map : nullptr, column);
        if (!column.name().empty()) *out.add_columns() = std::move(column);
    }
}

// The answer's rows, bounds-checked against the frame they answer (workload rows index its workloads) and
// filtered like its workloads section, as columns of the estimates segment's own schema.
void FrameEncoder::encode_answer(const Snapshot& frame, const Rows& rows, const SourceAnswer& answer, v1::ModelEstimates& out) const {
    out.set_shm_name(utf8(answer.shm_name));
    const auto missing = [&](const std::string& reason) {
        out.set_missing(true);
        out.set_reason(utf8(reason));
    };
    if (answer.answer == nullptr) return missing(answer.reason);
    const Snapshot& estimates = *answer.answer->estimates;
    const keplershm_header& h = estimates.segment->header;
    out.set_model(utf8(keplershm::get_text(h.node_name)));
    out.set_version(utf8(keplershm::get_text(h.cpu_model)));
    out.set_generation(estimates.generation);
    out.set_sequence(estimates.sequence);
    add_zones(h, *out.mutable_zones());
    const Snapshot::Section& section = *estimates.find(KEPLERSHM_SECTION_ESTIMATES);  // there: refusal() checked it
    const Snapshot::Section* workloads = frame.find(KEPLERSHM_SECTION_WORKLOADS);
    const uint32_t workload_count = workloads != nullptr ? workloads->count : 0;
    std::vector<uint32_t> kept;
    for (uint32_t i = 0; i < section.count; ++i) {
        const uint32_t w = load<uint32_t>(section.bytes.data() + static_cast<size_t>(i) * section.stride + offsetof(keplershm_estimate, workload_index));
        if (w == KEPLERSHM_NO_WORKLOAD) {
            kept.push_back(i);
        } else if (w >= workload_count) {
            return missing(fmt::format("refused: row {} names workload {} but the frame has {} workloads", i, w, workload_count));
        } else if (!rows.remap || rows.workload_map[w] != KEPLERSHM_NO_WORKLOAD) {
            kept.push_back(i);
        }
    }
    v1::Section& out_rows = *out.mutable_rows();
    out_rows.set_name(estimates_plan_->kind.name);
    out_rows.set_id(KEPLERSHM_SECTION_ESTIMATES);
    out_rows.set_stride(section.stride);
    out_rows.set_rows(static_cast<uint32_t>(kept.size()));
    for (const keplershm_field& field : estimates.segment->schema) {
        if (field.record_type != KEPLERSHM_RECORD_ESTIMATE) continue;
        const std::string_view name = keplershm::get_text(field.name);
        const std::vector<std::string>& wanted = estimates_plan_->fields;
        if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), name) == wanted.end()) continue;
        v1::Column column;
        encode_column(section, field, kept, rows.remap && name == "workload_index" ? &rows.workload_map : nullptr, column);
        if (!column.name().empty()) *out_rows.add_columns() = std::move(column);
    }
}

void FrameEncoder::encode(const Snapshot& snapshot, uint64_t extra_missed, v1::Frame& out,
                          const std::vector<SourceAnswer>& answers) {
    out.set_sequence(snapshot.sequence);
    out.set_generation(snapshot.generation);
    out.set_missed(snapshot.missed + extra_missed);
    fill_header(snapshot.header, *out.mutable_header());
    if (snapshot.generation != described_generation_) {
        fill_segment(*snapshot.segment, *out.mutable_segment());
        described_generation_ = snapshot.generation;
    }
    const Rows rows = plan_rows(snapshot);
    for (const SectionPlan& plan : selection_.sections)
        if (snapshot.find(plan.kind.id) != nullptr) encode_section(snapshot, plan, rows, *out.add_sections());
    if (!estimates_plan_) return;
    for (const SourceAnswer& answer : answers) encode_answer(snapshot, rows, answer, *out.add_estimates());
}

}  // namespace kepler::feed
