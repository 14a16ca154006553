// The stable C ABI: thin, exception-free wrappers over the C++ implementation. Option and info structs
// follow libbpf's size-first convention (see copy_options / copy_out).
#include <cstring>
#include <new>

#include "error.hpp"
#include "keplershm.h"
#include "liveness.hpp"
#include "reader_impl.hpp"
#include "schema_table.h"

using namespace keplershm;
using namespace keplershm::detail;

struct keplershm_reader {
    Reader reader;
};
struct keplershm_writer {
    Writer writer;
    Draft draft;
};
struct keplershm_recorder {
    Recorder recorder;
};

namespace {

template <class F>
int guarded(F&& body) noexcept {
    clear_last_error();
    try {
        return body();
    } catch (const Error& e) {
        set_last_error(e.what());
        return e.code();
    } catch (const std::bad_alloc&) {
        set_last_error("out of memory");
        return KEPLERSHM_E_NO_MEMORY;
    } catch (const std::exception& e) {
        set_last_error(e.what());
        return KEPLERSHM_E_INTERNAL;
    }
}

int status_code(Status status) noexcept {
    switch (status) {
    case Status::ok: return KEPLERSHM_OK;
    case Status::not_yet: return KEPLERSHM_E_NOT_YET;
    case Status::lapped: return KEPLERSHM_E_LAPPED;
    case Status::timeout: return KEPLERSHM_E_TIMEOUT;
    case Status::writer_gone: return KEPLERSHM_E_WRITER_GONE;
    case Status::end_of_recording: return KEPLERSHM_E_END_OF_RECORDING;
    case Status::truncated: return KEPLERSHM_E_TRUNCATED;
    }
    return KEPLERSHM_E_INTERNAL;
}

/// Reads a caller's options struct of any size: older (smaller) structs get defaults for the rest;
/// newer (larger) ones are accepted only if the bytes this library does not know are zero.
template <class T>
T copy_options(const T* user) {
    T out{};
    if (user == nullptr) return out;
    if (user->sz < sizeof(size_t)) fail(KEPLERSHM_E_INVALID_ARGUMENT, "options struct has sz {}", user->sz);
    if (user->sz > sizeof(T)) {
        const auto* extra = reinterpret_cast<const uint8_t*>(user) + sizeof(T);
        for (size_t i = 0; i < user->sz - sizeof(T); ++i) {
            if (extra[i] != 0) fail(KEPLERSHM_E_UNKNOWN_OPTION, "option byte {} is unknown to this library", sizeof(T) + i);
        }
    }
    std::memcpy(&out, user, std::min(user->sz, sizeof(T)));
    return out;
}

/// Fills a caller's struct up to the size it declared.
template <class T>
void copy_out(T* user, const T& full) {
    if (user == nullptr || user->sz < sizeof(size_t)) fail(KEPLERSHM_E_INVALID_ARGUMENT, "output struct needs its sz set");
    const size_t declared = user->sz;
    std::memcpy(user, &full, std::min(declared, sizeof(T)));
    user->sz = declared;
}

/// A caller's view widened to this library's size.
FrameView widen(const keplershm_view* user) {
    FrameView view;
    if (user == nullptr || user->sz < sizeof(size_t)) fail(KEPLERSHM_E_INVALID_ARGUMENT, "view needs its sz set");
    std::memcpy(&view.raw(), user, std::min(user->sz, sizeof(keplershm_view)));
    view.raw().sz = sizeof(keplershm_view);
    return view;
}

template <class T>
void require(T* pointer, const char* what) {
    if (pointer == nullptr) fail(KEPLERSHM_E_INVALID_ARGUMENT, "{} is NULL", what);
}

ReaderOptions reader_options(const keplershm_reader_opts* user) {
    const keplershm_reader_opts o = copy_options(user);
    ReaderOptions options;
    options.heartbeat_timeout = std::chrono::milliseconds(o.heartbeat_timeout_ms);
    options.reattach = o.no_reattach == 0;
    if (o.max_frame_mib != 0) options.max_frame_bytes = uint64_t{o.max_frame_mib} << 20;
    switch (o.owner_check) {
        case KEPLERSHM_OWNER_ROOT_OR_SELF: break;
        case KEPLERSHM_OWNER_ROOT_OR_UID: options.segment_owner = o.owner_uid; break;
        case KEPLERSHM_OWNER_ANY: options.any_owner = true; break;
        default: fail(KEPLERSHM_E_INVALID_ARGUMENT, "owner_check {} is not a keplershm_owner_check", o.owner_check);
    }
    return options;
}

int read_frame(keplershm_reader* reader, struct keplershm_view* out, Status (Reader::*call)(uint64_t, FrameView&),
               uint64_t sequence) {
    require(reader, "reader");
    FrameView view;
    const Status status = (reader->reader.*call)(sequence, view);
    copy_out(out, view.raw());
    return status_code(status);
}

}  // namespace

extern "C" {

uint32_t keplershm_abi_version(void) { return (uint32_t{KEPLERSHM_ABI_MAJOR} << 16) | KEPLERSHM_ABI_MINOR; }

const char* keplershm_strerror(int error) {
    switch (error) {
    case KEPLERSHM_OK: return "success";
    case KEPLERSHM_E_INVALID_ARGUMENT: return "invalid argument";
    case KEPLERSHM_E_NOT_FOUND: return "segment or file not found";
    case KEPLERSHM_E_PERMISSION: return "permission denied";
    case KEPLERSHM_E_BAD_MAGIC: return "not a keplershm segment or recording";
    case KEPLERSHM_E_UNSUPPORTED_MAJOR: return "unsupported ABI major version";
    case KEPLERSHM_E_CORRUPT: return "corrupt segment, frame or recording";
    case KEPLERSHM_E_NOT_YET: return "frame not published yet";
    case KEPLERSHM_E_LAPPED: return "frame overwritten (reader lapped)";
    case KEPLERSHM_E_TIMEOUT: return "timed out";
    case KEPLERSHM_E_WRITER_GONE: return "writer gone (retired, replaced or heartbeat stale)";
    case KEPLERSHM_E_EXISTS: return "a live writer owns the segment";
    case KEPLERSHM_E_NO_SPACE: return "size cap or free space exceeded";
    case KEPLERSHM_E_CAPACITY: return "more records than the frame holds";
    case KEPLERSHM_E_IO: return "input/output error";
    case KEPLERSHM_E_END_OF_RECORDING: return "end of recording";
    case KEPLERSHM_E_TRUNCATED: return "recording truncated";
    case KEPLERSHM_E_STATE: return "call not valid in this state";
    case KEPLERSHM_E_NO_MEMORY: return "out of memory";
    case KEPLERSHM_E_UNKNOWN_OPTION: return "unknown non-zero option field";
    case KEPLERSHM_E_INTERNAL: return "internal error";
    default: return "unknown error code";
    }
}

const char* keplershm_last_error_detail(void) { return last_error(); }

uint32_t keplershm_record_size(uint32_t record_type) {
    switch (record_type) {
    case KEPLERSHM_RECORD_PROCESS: return sizeof(keplershm_process);
    case KEPLERSHM_RECORD_WORKLOAD: return sizeof(keplershm_workload);
    case KEPLERSHM_RECORD_ZONE_SAMPLE: return sizeof(keplershm_zone_sample);
    case KEPLERSHM_RECORD_CPU_SAMPLE: return sizeof(keplershm_cpu_sample);
    case KEPLERSHM_RECORD_UNACCOUNTED: return sizeof(keplershm_unaccounted);
    case KEPLERSHM_RECORD_FRAME: return sizeof(keplershm_frame);
    case KEPLERSHM_RECORD_ZONE_INFO: return sizeof(keplershm_zone_info);
    case KEPLERSHM_RECORD_ESTIMATE: return sizeof(keplershm_estimate);
    case KEPLERSHM_RECORD_SECTION: return sizeof(keplershm_section);
    case KEPLERSHM_RECORD_GPU_DEVICE: return sizeof(keplershm_gpu_device);
    case KEPLERSHM_RECORD_GPU_USAGE: return sizeof(keplershm_gpu_usage);
    case KEPLERSHM_STRUCT_HEADER: return sizeof(keplershm_header);
    case KEPLERSHM_STRUCT_SEGMENT_INFO: return sizeof(keplershm_segment_info);
    case KEPLERSHM_STRUCT_VIEW: return sizeof(keplershm_view);
    case KEPLERSHM_STRUCT_DRAFT: return sizeof(keplershm_draft);
    case KEPLERSHM_STRUCT_FIELD: return sizeof(keplershm_field);
    case KEPLERSHM_STRUCT_READER_OPTS: return sizeof(keplershm_reader_opts);
    case KEPLERSHM_STRUCT_WRITER_OPTS: return sizeof(keplershm_writer_opts);
    case KEPLERSHM_STRUCT_RECORDER_OPTS: return sizeof(keplershm_recorder_opts);
    case KEPLERSHM_STRUCT_RECORDING_HEADER: return sizeof(keplershm_recording_header);
    case KEPLERSHM_STRUCT_RECORD_HEADER: return sizeof(keplershm_record_header);
    case KEPLERSHM_STRUCT_SLOT_CONTROL: return sizeof(keplershm_slot_control);
    default: return 0;
    }
}

int keplershm_schema(struct keplershm_field* fields, uint32_t capacity, uint32_t* count) {
    return guarded([&] {
        require(count, "count");
        *count = keplershm_schema_count;
        if (fields != nullptr) std::memcpy(fields, keplershm_schema_table, std::min(capacity, keplershm_schema_count) * sizeof *fields);
        return KEPLERSHM_OK;
    });
}

int keplershm_reader_open(const char* shm_name, const keplershm_reader_opts* opts, keplershm_reader** out) {
    return guarded([&] {
        require(shm_name, "shm_name");
        require(out, "out");
        *out = new keplershm_reader{Reader::open(shm_name, reader_options(opts))};
        return KEPLERSHM_OK;
    });
}

int keplershm_reader_open_recording(const char* path, const keplershm_reader_opts* opts, keplershm_reader** out) {
    return guarded([&] {
        require(path, "path");
        require(out, "out");
        *out = new keplershm_reader{Reader::open_recording(path, reader_options(opts))};
        return KEPLERSHM_OK;
    });
}

void keplershm_reader_close(keplershm_reader* reader) { delete reader; }

int keplershm_reader_info(keplershm_reader* reader, keplershm_segment_info* info) {
    return guarded([&] {
        require(reader, "reader");
        copy_out(info, reader->reader.info());
        return KEPLERSHM_OK;
    });
}

int keplershm_reader_schema(keplershm_reader* reader, struct keplershm_field* fields, uint32_t capacity, uint32_t* count) {
    return guarded([&] {
        require(reader, "reader");
        require(count, "count");
        const std::vector<keplershm_field> schema = reader->reader.schema();
        *count = static_cast<uint32_t>(schema.size());
        if (fields != nullptr) std::memcpy(fields, schema.data(), std::min<size_t>(capacity, schema.size()) * sizeof *fields);
        return KEPLERSHM_OK;
    });
}

int keplershm_reader_latest(keplershm_reader* reader, uint64_t* sequence) {
    return guarded([&] {
        require(reader, "reader");
        require(sequence, "sequence");
        *sequence = reader->reader.latest();
        return KEPLERSHM_OK;
    });
}

int keplershm_reader_wait(keplershm_reader* reader, uint64_t after, int32_t timeout_ms) {
    return guarded([&] {
        require(reader, "reader");
        return status_code(reader->reader.wait(after, std::chrono::milliseconds(std::max<int32_t>(timeout_ms, 0))));
    });
}

int keplershm_reader_acquire(keplershm_reader* reader, uint64_t sequence, keplershm_view* view) {
    return guarded([&] { return read_frame(reader, view, &Reader::acquire, sequence); });
}

int keplershm_reader_copy(keplershm_reader* reader, uint64_t sequence, keplershm_view* view) {
    return guarded([&] { return read_frame(reader, view, &Reader::copy, sequence); });
}

int keplershm_view_schema(keplershm_reader* reader, const keplershm_view* view, struct keplershm_field* fields,
                          uint32_t capacity, uint32_t* count) {
    return guarded([&] {
        require(reader, "reader");
        require(count, "count");
        const FrameView frame = widen(view);
        const detail::Layout* layout = reader->reader.impl().layout_for(frame.raw());
        if (layout == nullptr) fail(KEPLERSHM_E_INVALID_ARGUMENT, "the view was not read by this reader");
        *count = static_cast<uint32_t>(layout->schema.size());
        if (fields != nullptr) std::memcpy(fields, layout->schema.data(), std::min<size_t>(capacity, layout->schema.size()) * sizeof *fields);
        return KEPLERSHM_OK;
    });
}

int keplershm_reader_validate(keplershm_reader* reader, const keplershm_view* view) {
    return guarded([&] {
        require(reader, "reader");
        return reader->reader.validate(widen(view)) ? KEPLERSHM_OK : KEPLERSHM_E_LAPPED;
    });
}

int keplershm_reader_next(keplershm_reader* reader, int32_t timeout_ms, keplershm_view* view) {
    return guarded([&] {
        require(reader, "reader");
        FrameView frame;
        const Status status = reader->reader.next(std::chrono::milliseconds(std::max<int32_t>(timeout_ms, 0)), frame);
        copy_out(view, frame.raw());
        return status_code(status);
    });
}

int keplershm_reader_reattach(keplershm_reader* reader) {
    return guarded([&] {
        require(reader, "reader");
        return reader->reader.reattach() ? 1 : 0;
    });
}

int keplershm_view_export(const keplershm_view* view, void* buffer, size_t capacity, size_t* frame_size) {
    return guarded([&] {
        const FrameView frame = widen(view);
        require(frame_size, "frame_size");
        *frame_size = frame.raw().frame_size;
        if (buffer == nullptr || capacity < frame.raw().frame_size) return KEPLERSHM_E_CAPACITY;
        std::memcpy(buffer, frame.raw().base, frame.raw().frame_size);
        return KEPLERSHM_OK;
    });
}

int keplershm_view_section(const keplershm_view* view, uint32_t section_id, const void** records, uint32_t* count,
                           uint32_t* stride) {
    return guarded([&] {
        const FrameView frame = widen(view);
        require(records, "records");
        require(count, "count");
        const keplershm_section* s = frame.find_section(section_id);
        *records = s != nullptr ? frame.raw().base + s->offset : nullptr;
        *count = s != nullptr ? s->count : 0;
        if (stride != nullptr) *stride = s != nullptr ? s->stride : 0;
        return KEPLERSHM_OK;
    });
}

int keplershm_writer_create(const char* shm_name, const keplershm_writer_opts* opts, keplershm_writer** out) {
    return guarded([&] {
        require(shm_name, "shm_name");
        require(out, "out");
        const keplershm_writer_opts o = copy_options(opts);
        WriterOptions options;
        auto set = [](uint32_t& field, uint32_t value) { if (value != 0) field = value; };
        set(options.slot_count, o.slot_count);
        set(options.process_capacity, o.process_capacity);
        set(options.workload_capacity, o.workload_capacity);
        set(options.zone_capacity, o.zone_capacity);
        set(options.cpu_capacity, o.cpu_capacity);
        set(options.string_capacity, o.string_capacity);
        set(options.segment_kind, o.segment_kind);
        set(options.mode, o.mode);
        if (o.max_segment_bytes != 0) options.max_segment_bytes = o.max_segment_bytes;
        if (o.heartbeat_period_ns != 0) options.heartbeat_period = std::chrono::nanoseconds(o.heartbeat_period_ns);
        options.metric_mask = o.metric_mask;
        if (o.node_name != nullptr) options.node_name = o.node_name;
        if (o.cpu_model != nullptr) options.cpu_model = o.cpu_model;
        options.cpu_count = o.cpu_count;
        if (o.zone_count > KEPLERSHM_MAX_ZONES) fail(KEPLERSHM_E_INVALID_ARGUMENT, "zone_count {} > {}", o.zone_count, KEPLERSHM_MAX_ZONES);
        if (o.zone_count > 0) require(o.zones, "zones");
        options.zones.assign(o.zones, o.zones + o.zone_count);
        options.writer_version = o.writer_version;
        options.replace_live = o.replace_live != 0;
        options.gpu_device_capacity = o.gpu_device_capacity;
        options.gpu_usage_capacity = o.gpu_usage_capacity;
        *out = new keplershm_writer{Writer(shm_name, options), Draft{}};
        return KEPLERSHM_OK;
    });
}

int keplershm_writer_begin(keplershm_writer* writer, keplershm_draft* draft) {
    return guarded([&] {
        require(writer, "writer");
        writer->draft = writer->writer.begin();
        copy_out(draft, writer->draft.raw());
        return KEPLERSHM_OK;
    });
}

int keplershm_writer_commit(keplershm_writer* writer, keplershm_draft* draft) {
    return guarded([&] {
        require(writer, "writer");
        require(draft, "draft");
        if (draft->sz < sizeof(size_t)) fail(KEPLERSHM_E_INVALID_ARGUMENT, "draft needs its sz set");
        // Pointers and capacities stay the library's; only what the caller may set is taken from it.
        keplershm_draft theirs{};
        std::memcpy(&theirs, draft, std::min(draft->sz, sizeof theirs));
        keplershm_draft& ours = writer->draft.raw();
        if (theirs.sequence != ours.sequence) fail(KEPLERSHM_E_STATE, "draft is not the one begin() returned");
        ours.process_count = theirs.process_count;
        ours.workload_count = theirs.workload_count;
        ours.zone_count = theirs.zone_count;
        ours.cpu_count = theirs.cpu_count;
        ours.string_used = theirs.string_used;
        ours.processes_wanted = theirs.processes_wanted;
        ours.estimate_count = theirs.estimate_count;
        ours.gpu_device_count = theirs.gpu_device_count;
        ours.gpu_usage_count = theirs.gpu_usage_count;
        writer->writer.commit(writer->draft);
        return KEPLERSHM_OK;
    });
}

int keplershm_writer_heartbeat(keplershm_writer* writer) {
    return guarded([&] {
        require(writer, "writer");
        writer->writer.heartbeat();
        return KEPLERSHM_OK;
    });
}

int keplershm_writer_set_overhead(keplershm_writer* writer, uint64_t cpu_time_ns, uint64_t rss_bytes) {
    return guarded([&] {
        require(writer, "writer");
        writer->writer.set_overhead(cpu_time_ns, rss_bytes);
        return KEPLERSHM_OK;
    });
}

int keplershm_writer_info(keplershm_writer* writer, keplershm_segment_info* info) {
    return guarded([&] {
        require(writer, "writer");
        const keplershm_header& h = writer->writer.header();
        keplershm_segment_info full = info_from_header(h);
        full.latest_sequence = writer->writer.latest_sequence();
        full.state = h.state;
        // The writer's own beats (it stores them on this thread); the timeout readers apply by default.
        full.heartbeat_count = h.heartbeat_count;
        full.heartbeat_realtime_ns = h.heartbeat_realtime_ns;
        full.heartbeat_timeout_ns = default_heartbeat_timeout_ns(h.heartbeat_period_ns);
        copy_out(info, full);
        return KEPLERSHM_OK;
    });
}

void keplershm_writer_close(keplershm_writer* writer, int keep_name) {
    if (writer == nullptr) return;
    writer->writer.close(keep_name != 0);
    delete writer;
}

int keplershm_recorder_open(const char* path, const keplershm_recorder_opts* opts, keplershm_recorder** out) {
    return guarded([&] {
        require(path, "path");
        require(out, "out");
        const keplershm_recorder_opts o = copy_options(opts);
        *out = new keplershm_recorder{Recorder(path, RecorderOptions{o.max_bytes, o.fsync_every})};
        return KEPLERSHM_OK;
    });
}

int keplershm_recorder_append(keplershm_recorder* recorder, keplershm_reader* reader, const keplershm_view* view) {
    return guarded([&] {
        require(recorder, "recorder");
        require(reader, "reader");
        recorder->recorder.append(reader->reader, widen(view));
        return KEPLERSHM_OK;
    });
}

int keplershm_recorder_follow(keplershm_recorder* recorder, keplershm_reader* reader, uint64_t duration_ms,
                              uint64_t* frames_written) {
    return guarded([&] {
        require(recorder, "recorder");
        require(reader, "reader");
        const uint64_t n = recorder->recorder.follow(reader->reader, std::chrono::milliseconds(duration_ms));
        if (frames_written != nullptr) *frames_written = n;
        return KEPLERSHM_OK;
    });
}

int keplershm_recorder_stats(keplershm_recorder* recorder, uint64_t* frames, uint64_t* bytes) {
    return guarded([&] {
        require(recorder, "recorder");
        if (frames != nullptr) *frames = recorder->recorder.frames_written();
        if (bytes != nullptr) *bytes = recorder->recorder.bytes_written();
        return KEPLERSHM_OK;
    });
}

int keplershm_recorder_close(keplershm_recorder* recorder) {
    if (recorder == nullptr) return KEPLERSHM_OK;
    const int rc = guarded([&] {
        recorder->recorder.close();
        return KEPLERSHM_OK;
    });
    delete recorder;
    return rc;
}

}  // extern "C"
