// keplershm.hpp — C++ API of libkeplershm: Writer, Reader, Recorder and frame views.
//
// The byte layout is the one of keplershm_layout.h; this API adds RAII, exceptions for broken input and
// typed access to sections. Objects are not thread-safe: use one per thread (several readers of the
// same segment in one process are fine).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "keplershm.h"

namespace keplershm {

/// A keplershm_error code with a message naming the file, field or value at fault.
class Error : public std::runtime_error {
public:
    Error(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
    [[nodiscard]] int code() const noexcept { return code_; }

private:
    int code_;
};

/// Outcomes of reading that are part of normal operation (everything else throws Error).
enum class Status { ok, not_yet, lapped, timeout, writer_gone, end_of_recording, truncated };

[[nodiscard]] const char* to_string(Status status) noexcept;

/// Records of one section, stepped by the producer's stride (a newer minor may append fields).
template <class Record>
class Records {
public:
    Records() = default;
    Records(const void* base, uint32_t count, uint32_t stride)
        : base_(static_cast<const uint8_t*>(base)), count_(count), stride_(stride) {}

    [[nodiscard]] uint32_t size() const noexcept { return count_; }
    [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
    [[nodiscard]] const Record& operator[](uint32_t index) const noexcept {
        return *reinterpret_cast<const Record*>(base_ + static_cast<size_t>(index) * stride_);
    }

    class iterator {
    public:
        iterator(const Records* records, uint32_t index) : records_(records), index_(index) {}
        const Record& operator*() const noexcept { return (*records_)[index_]; }
        iterator& operator++() noexcept { ++index_; return *this; }
        bool operator==(const iterator& other) const noexcept { return index_ == other.index_; }
    private:
        const Records* records_;
        uint32_t index_;
    };
    [[nodiscard]] iterator begin() const noexcept { return {this, 0}; }
    [[nodiscard]] iterator end() const noexcept { return {this, count_}; }

private:
    const uint8_t* base_ = nullptr;
    uint32_t count_ = 0;
    uint32_t stride_ = 0;
};

/// A frame: a bounds-checked snapshot of its header and section directory plus pointers to the
/// records, either into the shared mapping (in place: check Reader::validate after reading) or into a
/// private copy. Cheap to copy; does not own the bytes.
class FrameView {
public:
    FrameView() { view_.sz = sizeof view_; }

    [[nodiscard]] uint64_t sequence() const noexcept { return view_.sequence; }
    [[nodiscard]] uint64_t generation() const noexcept { return view_.generation; }
    [[nodiscard]] uint64_t missed() const noexcept { return view_.missed; }
    [[nodiscard]] bool in_place() const noexcept { return view_.in_place != 0; }
    [[nodiscard]] uint64_t interval_start_ns() const noexcept { return view_.interval_start_ns; }
    [[nodiscard]] uint64_t interval_end_ns() const noexcept { return view_.interval_end_ns; }
    [[nodiscard]] uint32_t flags() const noexcept { return view_.flags; }
    [[nodiscard]] uint32_t source() const noexcept { return view_.source; }
    [[nodiscard]] uint32_t power_source() const noexcept { return view_.power_source; }
    /// The frame header (in place: may change under you until validated).
    [[nodiscard]] const keplershm_frame& header() const noexcept { return *view_.frame; }
    /// The segment header that describes this frame (a validated private snapshot).
    [[nodiscard]] const keplershm_header& segment() const noexcept { return *view_.segment; }

    [[nodiscard]] Records<keplershm_process> processes() const { return section<keplershm_process>(KEPLERSHM_SECTION_PROCESSES); }
    [[nodiscard]] Records<keplershm_workload> workloads() const { return section<keplershm_workload>(KEPLERSHM_SECTION_WORKLOADS); }
    [[nodiscard]] Records<keplershm_zone_sample> zones() const { return section<keplershm_zone_sample>(KEPLERSHM_SECTION_ZONES); }
    [[nodiscard]] Records<keplershm_cpu_sample> cpus() const { return section<keplershm_cpu_sample>(KEPLERSHM_SECTION_CPUS); }
    [[nodiscard]] Records<keplershm_estimate> estimates() const { return section<keplershm_estimate>(KEPLERSHM_SECTION_ESTIMATES); }
    /// 1.4: the node's GPUs and MIG instances, and per-process GPU use (empty from older writers).
    [[nodiscard]] Records<keplershm_gpu_device> gpu_devices() const { return section<keplershm_gpu_device>(KEPLERSHM_SECTION_GPU_DEVICES); }
    [[nodiscard]] Records<keplershm_gpu_usage> gpu_usage() const { return section<keplershm_gpu_usage>(KEPLERSHM_SECTION_GPU_USAGE); }
    /// The unaccounted record, or nullptr when the frame has none.
    [[nodiscard]] const keplershm_unaccounted* unaccounted() const;
    /// Text from the STRINGS section; empty when the range is out of bounds.
    [[nodiscard]] std::string_view string_at(uint32_t offset, uint32_t length) const;
    /// Raw section lookup: records, count and stride (count 0 when absent).
    [[nodiscard]] const keplershm_section* find_section(uint32_t section_id) const noexcept;

    template <class Record>
    [[nodiscard]] Records<Record> section(uint32_t section_id) const {
        const keplershm_section* s = find_section(section_id);
        if (s == nullptr) return {};
        return Records<Record>(view_.base + s->offset, s->count, s->stride);
    }

    [[nodiscard]] const keplershm_view& raw() const noexcept { return view_; }
    [[nodiscard]] keplershm_view& raw() noexcept { return view_; }

private:
    keplershm_view view_{};
};

/// Fixed-width text fields: copies `text` truncated to the field, NUL-padded.
template <size_t N>
void set_text(char (&field)[N], std::string_view text) noexcept {
    const size_t n = text.size() < N - 1 ? text.size() : N - 1;
    for (size_t i = 0; i < N; ++i) field[i] = i < n ? text[i] : '\0';
}
/// Reads a fixed-width text field (stops at the first NUL or the end of the field).
template <size_t N>
[[nodiscard]] std::string_view get_text(const char (&field)[N]) noexcept {
    size_t n = 0;
    while (n < N && field[n] != '\0') ++n;
    return {field, n};
}

/// A process as frames name it (keplershm_process.pid, .start_time_ticks): its thread-group id and its start
/// time in clock ticks since boot (/proc/<pid>/stat field 22). A reused pid has another start time, so two
/// processes never merge. Writers and readers key their per-process state by it. Plain value.
struct ProcessKey {
    uint32_t pid = 0;
    uint64_t start_time_ticks = 0;
    friend bool operator==(const ProcessKey&, const ProcessKey&) = default;
};

struct ProcessKeyHash {
    size_t operator()(const ProcessKey& k) const noexcept {
        return std::hash<uint64_t>{}((uint64_t{k.pid} << 40) ^ k.start_time_ticks);
    }
};

/// The name of an enum keplershm_runtime value ("docker", "containerd", "cri-o", "podman", "libvirt", "qemu",
/// "xen", "firecracker", "cloud-hypervisor", "virtualbox", "vmware"); "unknown" for 0 and for values of
/// newer minors.
[[nodiscard]] std::string_view runtime_name(uint32_t runtime) noexcept;
/// Kepler's `hypervisor` label of a VM's runtime: "kvm" (libvirt, QEMU, Firecracker, Cloud Hypervisor),
/// "xen", "virtualbox", "vmware", else "unknown".
[[nodiscard]] std::string_view hypervisor_name(uint32_t runtime) noexcept;
/// The name of an enum keplershm_power_source value ("rapl", "hwmon", "acpi", "redfish", "pmbus", "nvml");
/// "unknown" for 0 and for values of newer minors.
[[nodiscard]] std::string_view power_source_name(uint32_t power_source) noexcept;
/// Kepler 0.11's `source_type` of an enum keplershm_meter_detail value ("PowerSupply", "PowerControl",
/// "PowerMeter"); "" when not said.
[[nodiscard]] std::string_view meter_detail_name(uint32_t detail) noexcept;
/// Kepler 0.11's `vendor` label of an enum keplershm_gpu_vendor value ("nvidia", "amd", "intel"); "unknown"
/// for 0 and for values of newer minors.
[[nodiscard]] std::string_view gpu_vendor_name(uint32_t vendor) noexcept;

/// Segment names: 1 to kMaxSegmentName characters of [A-Za-z0-9._-], not starting with '.' (a file in
/// /dev/shm that no path trick can leave).
inline constexpr size_t kMaxSegmentName = 200;
/// Throws Error (KEPLERSHM_E_INVALID_ARGUMENT) saying the rule when `name` breaks it; writers and readers
/// check every name this way.
void check_segment_name(const std::string& name);

// ------------------------------------------------------------------------------------------------
// Writer
// ------------------------------------------------------------------------------------------------

struct WriterOptions {
    uint32_t slot_count = 8;
    uint32_t process_capacity = 4096;
    uint32_t workload_capacity = 512;
    uint32_t zone_capacity = KEPLERSHM_MAX_ZONES;
    uint32_t cpu_capacity = 0;  // 0: CPUs configured on this machine
    uint32_t string_capacity = 64 * 1024;
    uint32_t segment_kind = KEPLERSHM_SEGMENT_FRAMES;
    uint32_t mode = 0640;
    uint64_t max_segment_bytes = 256ull << 20;
    std::chrono::nanoseconds heartbeat_period = std::chrono::seconds(1);
    uint64_t metric_mask = 0;
    std::string node_name;  // empty: uname nodename
    std::string cpu_model;
    uint32_t cpu_count = 0;  // 0: CPUs configured
    std::vector<keplershm_zone_info> zones;
    std::string platform_meter_id;  // 1.3: the node's BMC, when a zone's power_source is REDFISH
    uint32_t writer_version = 0;
    bool replace_live = false;  // take the name even from a live writer
    uint32_t gpu_device_capacity = 0;  // 1.4: GPU_DEVICES records per frame (0: frames carry no GPU sections)
    uint32_t gpu_usage_capacity = 0;   // 1.4: GPU_USAGE records per frame
    /// Told when something degrades without failing a call (e.g. growth refused for lack of room), and
    /// before the writer watches a predecessor's heartbeat (up to its timeout) to learn whether it lives.
    std::function<void(const std::string&)> on_warning;
    /// Polled (every 20 ms) while the writer watches a predecessor's heartbeat: true ends the wait with
    /// Error(STATE), so that a signal handler's flag stops a writer held by a planted segment.
    std::function<bool()> stop_requested;
};

/// A frame being written: pointers into the slot. Write whole records (start from a zeroed struct),
/// then Writer::commit. Records past a section's capacity are refused, never written.
class Draft {
public:
    [[nodiscard]] keplershm_frame& frame() noexcept { return *raw_.frame; }
    [[nodiscard]] uint64_t sequence() const noexcept { return raw_.sequence; }
    bool add_process(const keplershm_process& record) noexcept;
    bool add_workload(const keplershm_workload& record) noexcept;
    bool add_zone(const keplershm_zone_sample& record) noexcept;
    bool add_cpu(const keplershm_cpu_sample& record) noexcept;
    bool add_estimate(const keplershm_estimate& record) noexcept;
    bool add_gpu_device(const keplershm_gpu_device& record) noexcept;
    bool add_gpu_usage(const keplershm_gpu_usage& record) noexcept;
    /// Appends text to the STRINGS section; returns its offset, or nullopt when it does not fit.
    std::optional<uint32_t> add_string(std::string_view text) noexcept;
    [[nodiscard]] keplershm_unaccounted& unaccounted() noexcept { return *raw_.unaccounted; }
    /// Tells the writer how many processes the interval really had (it grows the segment if it can).
    void set_processes_wanted(uint32_t wanted) noexcept { raw_.processes_wanted = wanted; }
    [[nodiscard]] uint32_t process_capacity() const noexcept { return raw_.process_capacity; }
    [[nodiscard]] uint32_t workload_capacity() const noexcept { return raw_.workload_capacity; }

    [[nodiscard]] keplershm_draft& raw() noexcept { return raw_; }

private:
    keplershm_draft raw_{};
};

class WriterImpl;

/// The single writer of a segment. Creating it takes the name (replacing a dead writer's segment);
/// destroying it retires the segment (readers see a clean stop).
class Writer {
public:
    Writer(const std::string& name, const WriterOptions& options);
    Writer(Writer&&) noexcept;
    Writer& operator=(Writer&&) noexcept;
    ~Writer();

    /// Starts the next frame. Grows the segment first if the previous frame asked for more capacity.
    Draft begin();
    /// Publishes the draft and wakes waiting readers.
    void commit(Draft& draft);
    void heartbeat();
    void set_overhead(uint64_t cpu_time_ns, uint64_t rss_bytes);
    [[nodiscard]] const keplershm_header& header() const;
    [[nodiscard]] uint64_t generation() const;
    [[nodiscard]] uint64_t latest_sequence() const;
    [[nodiscard]] const std::string& name() const;
    /// Retires the segment; the name is removed unless keep_name.
    void close(bool keep_name = false);

private:
    std::unique_ptr<WriterImpl> impl_;
};

// ------------------------------------------------------------------------------------------------
// Reader
// ------------------------------------------------------------------------------------------------

struct ReaderOptions {
    // How long the writer's heartbeat may stand still, on this reader's clock, before the writer is stale
    // (PROTOCOL.md §1.3). 0: 3 heartbeat periods + 1 s.
    std::chrono::milliseconds heartbeat_timeout{0};
    bool reattach = true;                             // follow the writer to new generations
    // Where next() begins on a live segment: its newest frame (a monitor), or the oldest frame its ring
    // still holds (a relay such as kepler-feed, whose subscribers resume from a sequence they saw).
    enum class Start { newest, oldest_held };
    Start start = Start::newest;
    // The header is untrusted and a reader's copy buffer grows with the frames it reads: a segment whose
    // slots hold frames larger than this is refused at open (Error NO_MEMORY), never allocated for.
    uint64_t max_frame_bytes = 64ull << 20;
    // Who may own a segment this reader opens (PROTOCOL.md §8): by default root or this process's
    // effective uid; `segment_owner` names another uid to accept besides root. A world-writable segment
    // is refused either way (Error PERMISSION). `any_owner` turns both checks off.
    std::optional<uint32_t> segment_owner;
    bool any_owner = false;
};

class ReaderImpl;

/// Reads frames of a live segment or of a recording. Never blocks or slows the writer; treats every
/// byte it maps as untrusted.
class Reader {
public:
    static Reader open(const std::string& name, const ReaderOptions& options = {});
    static Reader open_recording(const std::string& path, const ReaderOptions& options = {});
    Reader(Reader&&) noexcept;
    Reader& operator=(Reader&&) noexcept;
    ~Reader();

    /// Node facts, latest frame, writer state, and liveness as this reader judges it (heartbeat_age_ns,
    /// writer_stale: both from the heartbeat's progress since this reader began watching).
    [[nodiscard]] keplershm_segment_info info();
    /// Newest published frame (live) or number of frames (recording).
    [[nodiscard]] uint64_t latest();
    /// Until a frame newer than `after` exists: ok, timeout, writer_gone (retired, replaced, or stale: its
    /// heartbeat stood still for the timeout), end_of_recording.
    Status wait(uint64_t after, std::chrono::milliseconds timeout);
    /// Frame `sequence` in place (recordings: the n-th frame, from 1): ok, not_yet or lapped.
    Status acquire(uint64_t sequence, FrameView& view);
    /// True while an in-place view is still intact.
    [[nodiscard]] bool validate(const FrameView& view);
    /// Frame `sequence` copied into this reader's buffer (valid until the next copy or next()).
    Status copy(uint64_t sequence, FrameView& view);
    /// The frame after the last one returned (copied), waiting up to `timeout`; follows restarts.
    Status next(std::chrono::milliseconds timeout, FrameView& view);
    /// Looks for a newer generation under the name; true if the reader moved to it.
    bool reattach();
    /// Field schema published by the segment (validated copy).
    [[nodiscard]] std::vector<keplershm_field> schema();

    [[nodiscard]] ReaderImpl& impl() noexcept { return *impl_; }

private:
    explicit Reader(std::unique_ptr<ReaderImpl> impl);
    std::unique_ptr<ReaderImpl> impl_;
};

// ------------------------------------------------------------------------------------------------
// Recorder
// ------------------------------------------------------------------------------------------------

struct RecorderOptions {
    uint64_t max_bytes = 0;     // 0: unlimited
    uint32_t fsync_every = 0;   // frames between fsyncs, 0: at close only
};

class RecorderImpl;

/// Appends frames to a recording file in the protocol's own format (see keplershm_layout.h).
class Recorder {
public:
    Recorder(const std::string& path, const RecorderOptions& options = {});
    Recorder(Recorder&&) noexcept;
    Recorder& operator=(Recorder&&) noexcept;
    ~Recorder();

    /// Appends a frame that `reader` returned (in place or copied). Throws Error: NO_SPACE at the size
    /// cap, LAPPED if an in-place frame was overwritten while it was being stored.
    void append(Reader& reader, const FrameView& view);
    /// Appends every frame `reader` delivers for `duration` (0: until the cap or the writer retires).
    /// Returns the number of frames appended.
    uint64_t follow(Reader& reader, std::chrono::milliseconds duration);
    [[nodiscard]] uint64_t frames_written() const;
    [[nodiscard]] uint64_t bytes_written() const;
    void close();

private:
    std::unique_ptr<RecorderImpl> impl_;
};

/// The library's own field schema (what this build's structs look like).
[[nodiscard]] std::span<const keplershm_field> library_schema() noexcept;

}  // namespace keplershm
