// The single writer of a segment: creation (replacing a dead writer atomically), the publish path, the
// heartbeat, growth into a new generation, and retirement.
#include <pwd.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <utility>

#include "clock.hpp"
#include "error.hpp"
#include "futex.hpp"
#include "layout.hpp"
#include "liveness.hpp"
#include "schema_table.h"
#include "segment.hpp"
#include "seqlock.hpp"

namespace keplershm {

using namespace detail;

namespace {

uint64_t new_generation_id() {
    std::random_device entropy;
    uint64_t id = 0;
    while (id == 0) id = (uint64_t{entropy()} << 32) ^ entropy() ^ monotonic_ns();
    return id;
}

std::string this_node_name() {
    utsname u{};
    return uname(&u) == 0 ? std::string(u.nodename) : std::string();
}

uint32_t configured_cpus() {
    const long n = sysconf(_SC_NPROCESSORS_CONF);
    return n > 0 ? static_cast<uint32_t>(n) : 1;
}

/// What stands under the name before we take it.
struct Predecessor {
    bool exists = false;
    bool live = false;
    uint64_t latest_sequence = 0;
    std::string description;
};

/// A sign of life (PROTOCOL.md §1.3): heartbeat_ns for readers of ABI 1.0, the wall time for people, and
/// the counter whose progress readers of 1.1 watch.
void beat(keplershm_header& h) noexcept {
    // SYNC POINT (partner: read_heartbeat in liveness.cpp). Relaxed: readers compare these values with
    // their own earlier samples only, and nothing else is published through them. One writer per
    // segment, so the counter needs no read-modify-write.
    atomic_word(h.heartbeat_ns).store(monotonic_ns(), std::memory_order_relaxed);
    atomic_word(h.heartbeat_realtime_ns).store(realtime_ns(), std::memory_order_relaxed);
    atomic_word(h.heartbeat_count).store(atomic_word(h.heartbeat_count).load(std::memory_order_relaxed) + 1,
                                         std::memory_order_relaxed);
}

/// The predecessor's header as it stands now, copied with pread: its owner may be anyone (a planted
/// segment), and a mapping it shrinks would raise SIGBUS on our next load. Throws Error if it shrank.
keplershm_header runtime_of(const MappedSegment& old, const std::string& name) {
    keplershm_header h{};
    if (old.read_at(0, &h, sizeof h) != sizeof h) fail(KEPLERSHM_E_CORRUPT, "segment '{}' shrank while it was watched", name);
    // SYNC POINT (partner: the old writer's release stores of its state in close() and mark_replaced(), and
    // of latest_sequence in announce()): the kernel's copy stands for acquire loads of them.
    std::atomic_thread_fence(std::memory_order_acquire);
    return h;
}

/// The longest watch of a predecessor's heartbeat. Its header names the period, and a planted header may
/// name an hour; a real writer beats every few seconds at most (kepler-collect: every second).
constexpr uint64_t kMaxPredecessorWatchNs = 60'000'000'000ull;

/// Watches a predecessor until it shows itself alive (its heartbeat advances) or dead (retired, replaced,
/// or a heartbeat that stood still for `timeout_ns` on our clock). Its clock values tell nothing: it may
/// run in another time namespace. Costs up to one timeout when the predecessor is dead; `stop_requested`
/// ends the wait early with Error(STATE).
bool predecessor_alive(const MappedSegment& old, const std::string& name, uint64_t timeout_ns, HeartbeatWatch& watch,
                       const std::function<bool()>& stop_requested) {
    constexpr auto kPoll = std::chrono::milliseconds(20);  // a beat is seen within a period + 20 ms
    watch.start(read_heartbeat(runtime_of(old, name)), monotonic_ns());
    for (;;) {
        const keplershm_header h = runtime_of(old, name);
        if (h.state == KEPLERSHM_STATE_RETIRED || h.state == KEPLERSHM_STATE_REPLACED) return false;
        const uint64_t now = monotonic_ns();
        watch.observe(read_heartbeat(h), now);
        if (watch.advanced()) return true;
        if (watch.stale(now, timeout_ns)) return false;
        if (stop_requested && stop_requested()) {
            fail(KEPLERSHM_E_STATE, "stopped while watching the heartbeat of the segment under '{}'", name);
        }
        std::this_thread::sleep_for(kPoll);
    }
}

/// Who owns what stands under `name`, for a refusal: "owned by uid 65534 (nobody)"; the user name where the
/// system knows it. Empty when it cannot be told (then the refusal says what it can).
std::string owner_of(const std::string& name) {
    struct stat st {};
    if (lstat(segment_path(name).c_str(), &st) != 0) return {};
    std::string text = fmt::format("owned by uid {}", st.st_uid);
    struct passwd entry {};
    struct passwd* found = nullptr;
    char buffer[1024];
    if (getpwuid_r(st.st_uid, &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr) {
        text += fmt::format(" ({})", found->pw_name);
    }
    return text;
}

/// What stands under `name`; with `judge_liveness`, watched until it is known to be alive or dead (and
/// `options.on_warning` told first, since that can take a heartbeat timeout).
Predecessor inspect_predecessor(const std::string& name, bool judge_liveness, const WriterOptions& options) {
    Predecessor p;
    MappedSegment old;
    try {
        old = MappedSegment::open_read_only(name);
    } catch (const Error& e) {
        if (e.code() == KEPLERSHM_E_NOT_FOUND) return p;
        fail(e.code(), "{} ({}) is in the way: {}; remove it or use another segment name", segment_path(name), owner_of(name),
             e.what());
    }
    p.exists = true;
    const Layout layout = [&] {
        try {
            return read_segment_layout(old);
        } catch (const Error& e) {  // garbage or a foreign object: refuse to touch it, and say what to do
            fail(KEPLERSHM_E_CORRUPT, "{} ({}) holds something that is not a usable keplershm segment ({}); remove it or "
                 "use another segment name", segment_path(name), owner_of(name), e.what());
        }
    }();
    const uint64_t claimed_ns = default_heartbeat_timeout_ns(layout.header.heartbeat_period_ns);
    const uint64_t timeout_ns = std::min(claimed_ns, kMaxPredecessorWatchNs);
    const uint32_t initial_state = runtime_of(old, name).state;
    const bool ended = initial_state == KEPLERSHM_STATE_RETIRED || initial_state == KEPLERSHM_STATE_REPLACED;
    if (judge_liveness && !ended && options.on_warning) {
        options.on_warning(fmt::format(
            "segment '{}' is held by generation {:#x} (owner uid {}, heartbeat period {:.1f} s{}): watching its heartbeat "
            "for up to {:.1f} s; the name is taken if it stands still, refused if it advances", name,
            layout.header.generation, old.owner(), static_cast<double>(layout.header.heartbeat_period_ns) / 1e9,
            claimed_ns > timeout_ns ? ", more than any writer uses" : "", static_cast<double>(timeout_ns) / 1e9));
    }
    HeartbeatWatch watch;
    p.live = judge_liveness && predecessor_alive(old, name, timeout_ns, watch, options.stop_requested);
    const keplershm_header h = runtime_of(old, name);
    p.latest_sequence = h.latest_sequence;  // continue after its last frame
    p.description = fmt::format("generation {:#x}, owner uid {}, state {}, heartbeat {}", layout.header.generation,
                                old.owner(), h.state, watch.advanced() ? "advancing" : "not advancing");
    if (const uint64_t wall = read_heartbeat(h).realtime_ns; wall != 0) {
        p.description += fmt::format(", last at {}", wall_time_text(wall));
    }
    return p;
}

/// Tells a predecessor's readers that a newer generation holds the name.
void mark_replaced(MappedSegment& old) {
    auto& h = *reinterpret_cast<keplershm_header*>(old.data());
    // SYNC POINT (partner: the acquire loads of the state in ReaderImpl::writer_gone and
    // predecessor_alive). Release: a reader that sees REPLACED and re-opens the name finds the new
    // segment, which was published (renamed) before this store.
    atomic_word(h.state).store(KEPLERSHM_STATE_REPLACED, std::memory_order_release);
    atomic_word(h.futex_word).fetch_add(1, std::memory_order_release);
    futex_wake_all(&h.futex_word);
}

}  // namespace

class WriterImpl {
public:
    WriterImpl(std::string name, const WriterOptions& options) : name_(std::move(name)), options_(options) {
        validate_segment_name(name_);
        if (options_.slot_count < 2) fail(KEPLERSHM_E_INVALID_ARGUMENT, "slot_count must be at least 2");
        if (options_.zones.size() > KEPLERSHM_MAX_ZONES) {
            fail(KEPLERSHM_E_INVALID_ARGUMENT, "{} zones given, at most {}", options_.zones.size(), KEPLERSHM_MAX_ZONES);
        }
        if (options_.heartbeat_period.count() <= 0) fail(KEPLERSHM_E_INVALID_ARGUMENT, "heartbeat period must be positive");
        if ((options_.mode & 0002) != 0) {
            fail(KEPLERSHM_E_INVALID_ARGUMENT, "segment mode {:04o} lets any user write the segment; readers refuse that",
                 options_.mode);
        }
        if (options_.node_name.empty()) options_.node_name = this_node_name();
        if (options_.cpu_count == 0) options_.cpu_count = configured_cpus();
        caps_ = Capacities{options_.slot_count,
                           options_.process_capacity,
                           options_.workload_capacity,
                           options_.zone_capacity,
                           options_.cpu_capacity != 0 ? options_.cpu_capacity : options_.cpu_count,
                           options_.string_capacity,
                           options_.segment_kind,
                           options_.segment_kind == KEPLERSHM_SEGMENT_FRAMES ? options_.gpu_device_capacity : 0,
                           options_.segment_kind == KEPLERSHM_SEGMENT_FRAMES ? options_.gpu_usage_capacity : 0};
        if (const size_t removed = remove_stale_temporaries(name_); removed != 0 && options_.on_warning) {
            options_.on_warning(fmt::format("removed {} temporary segment(s) '{}.<generation>.tmp' left by a writer that "
                                            "died while creating them", removed, name_));
        }
        const Predecessor before = inspect_predecessor(name_, !options_.replace_live, options_);
        if (before.live && !options_.replace_live) {
            fail(KEPLERSHM_E_EXISTS, "segment '{}' belongs to a live writer ({}); stop it first", name_, before.description);
        }
        create_generation(before.exists, before.latest_sequence);
    }

    ~WriterImpl() { close(false); }

    Draft begin() {
        if (!segment_.mapped()) fail(KEPLERSHM_E_STATE, "writer of '{}' is closed", name_);
        if (in_frame_) fail(KEPLERSHM_E_STATE, "begin() called twice without commit()");
        if (grow_to_ > caps_.process_capacity) grow();
        const uint64_t n = latest_ + 1;
        uint8_t* slot = slot_address(n);
        seq_begin_write(reinterpret_cast<keplershm_slot_control*>(slot)->sequence, n);
        uint8_t* frame = slot + KEPLERSHM_SLOT_CONTROL_SIZE;
        std::memset(frame, 0, geometry_.directory_offset + KEPLERSHM_MAX_SECTIONS * sizeof(keplershm_section));
        std::memset(frame + geometry_.unaccounted_offset, 0, sizeof(keplershm_unaccounted));

        Draft draft;
        keplershm_draft& d = draft.raw();
        d.sz = sizeof d;
        d.sequence = n;
        d.frame = reinterpret_cast<keplershm_frame*>(frame);
        d.unaccounted = reinterpret_cast<keplershm_unaccounted*>(frame + geometry_.unaccounted_offset);
        d.zones = reinterpret_cast<keplershm_zone_sample*>(frame + geometry_.zones_offset);
        d.zone_capacity = caps_.zone_capacity;
        d.cpus = reinterpret_cast<keplershm_cpu_sample*>(frame + geometry_.cpus_offset);
        d.cpu_capacity = caps_.cpu_capacity;
        d.workloads = reinterpret_cast<keplershm_workload*>(frame + geometry_.workloads_offset);
        d.workload_capacity = caps_.workload_capacity;
        d.strings = reinterpret_cast<char*>(frame + geometry_.strings_offset);
        d.string_capacity = caps_.string_capacity;
        d.gpu_devices = reinterpret_cast<keplershm_gpu_device*>(frame + geometry_.gpu_devices_offset);
        d.gpu_device_capacity = caps_.gpu_device_capacity;
        d.gpu_usage = reinterpret_cast<keplershm_gpu_usage*>(frame + geometry_.gpu_usage_offset);
        d.gpu_usage_capacity = caps_.gpu_usage_capacity;
        if (caps_.segment_kind == KEPLERSHM_SEGMENT_ESTIMATES) {
            d.estimates = reinterpret_cast<keplershm_estimate*>(frame + geometry_.estimates_offset);
            d.estimate_capacity = caps_.process_capacity;
        } else {
            d.processes = reinterpret_cast<keplershm_process*>(frame + geometry_.processes_offset);
            d.process_capacity = caps_.process_capacity;
        }
        in_frame_ = true;
        return draft;
    }

    void commit(Draft& draft) {
        keplershm_draft& d = draft.raw();
        const uint64_t n = latest_ + 1;
        if (!in_frame_ || d.sequence != n) fail(KEPLERSHM_E_STATE, "commit() without a matching begin()");
        check_count(d.process_count, d.process_capacity, "processes");
        check_count(d.workload_count, d.workload_capacity, "workloads");
        check_count(d.zone_count, d.zone_capacity, "zones");
        check_count(d.cpu_count, d.cpu_capacity, "cpus");
        check_count(d.string_used, d.string_capacity, "string bytes");
        check_count(d.estimate_count, d.estimate_capacity, "estimates");
        check_count(d.gpu_device_count, d.gpu_device_capacity, "GPU devices");
        check_count(d.gpu_usage_count, d.gpu_usage_capacity, "GPU usage records");

        uint8_t* frame = reinterpret_cast<uint8_t*>(d.frame);
        auto* directory = reinterpret_cast<keplershm_section*>(frame + geometry_.directory_offset);
        uint32_t sections = 0;
        uint64_t end = geometry_.directory_offset + KEPLERSHM_MAX_SECTIONS * sizeof(keplershm_section);
        auto add = [&](uint32_t id, uint32_t offset, uint32_t count, uint32_t stride) {
            directory[sections++] = keplershm_section{id, stride, offset, count};
            end = std::max<uint64_t>(end, offset + uint64_t{count} * stride);
        };
        add(KEPLERSHM_SECTION_UNACCOUNTED, geometry_.unaccounted_offset, 1, sizeof(keplershm_unaccounted));
        add(KEPLERSHM_SECTION_ZONES, geometry_.zones_offset, d.zone_count, sizeof(keplershm_zone_sample));
        add(KEPLERSHM_SECTION_CPUS, geometry_.cpus_offset, d.cpu_count, sizeof(keplershm_cpu_sample));
        add(KEPLERSHM_SECTION_WORKLOADS, geometry_.workloads_offset, d.workload_count, sizeof(keplershm_workload));
        if (caps_.segment_kind == KEPLERSHM_SEGMENT_ESTIMATES) {
            add(KEPLERSHM_SECTION_ESTIMATES, geometry_.estimates_offset, d.estimate_count, sizeof(keplershm_estimate));
        } else {
            add(KEPLERSHM_SECTION_PROCESSES, geometry_.processes_offset, d.process_count, sizeof(keplershm_process));
        }
        add(KEPLERSHM_SECTION_STRINGS, geometry_.strings_offset, d.string_used, 1);
        // 1.4: GPU sections only in segments made to hold them, so 1.3-sized segments keep their directory.
        if (caps_.gpu_device_capacity != 0) {
            add(KEPLERSHM_SECTION_GPU_DEVICES, geometry_.gpu_devices_offset, d.gpu_device_count, sizeof(keplershm_gpu_device));
        }
        if (caps_.gpu_usage_capacity != 0) {
            add(KEPLERSHM_SECTION_GPU_USAGE, geometry_.gpu_usage_offset, d.gpu_usage_count, sizeof(keplershm_gpu_usage));
        }

        keplershm_frame& f = *d.frame;
        f.sequence = n;
        f.generation = header_->generation;
        f.section_count = sections;
        f.frame_size = static_cast<uint32_t>(end);
        // The directory sits right after the frame header: readers find it at frame_header_size.
        static_assert(sizeof(keplershm_frame) % KEPLERSHM_CACHE_LINE == 0);
        if (f.processes_seen < d.process_count) f.processes_seen = d.process_count;

        seq_publish(reinterpret_cast<keplershm_slot_control*>(frame - KEPLERSHM_SLOT_CONTROL_SIZE)->sequence, n);
        latest_ = n;
        in_frame_ = false;
        if (f.flags & KEPLERSHM_FRAME_TRUNCATED) {
            atomic_word(header_->frames_truncated).fetch_add(1, std::memory_order_relaxed);
        }
        if (d.processes_wanted > caps_.process_capacity) grow_to_ = d.processes_wanted;
        announce(n);
    }

    void heartbeat() {
        if (!segment_.mapped()) return;
        beat(*header_);
        dev_t device = 0;
        ino_t inode = 0;
        if (!segment_identity(name_, device, inode) || device != segment_.device() || inode != segment_.inode()) {
            fail(KEPLERSHM_E_EXISTS, "segment name '{}' no longer points to this writer's segment (taken over)", name_);
        }
    }

    void set_overhead(uint64_t cpu_time_ns, uint64_t rss_bytes) {
        atomic_word(header_->writer_cpu_time_ns).store(cpu_time_ns, std::memory_order_relaxed);
        atomic_word(header_->writer_rss_bytes).store(rss_bytes, std::memory_order_relaxed);
    }

    void close(bool keep_name) noexcept {
        if (!segment_.mapped()) return;
        // SYNC POINT (partner: the acquire loads of the state in ReaderImpl::writer_gone and
        // predecessor_alive). Release: everything published before is visible to a reader that sees RETIRED.
        atomic_word(header_->state).store(KEPLERSHM_STATE_RETIRED, std::memory_order_release);
        atomic_word(header_->futex_word).fetch_add(1, std::memory_order_release);
        futex_wake_all(&header_->futex_word);
        dev_t device = 0;
        ino_t inode = 0;
        if (!keep_name && segment_identity(name_, device, inode) && device == segment_.device() &&
            inode == segment_.inode()) {
            unlink_segment(name_);
        }
        segment_ = MappedSegment();
        header_ = nullptr;
    }

    const keplershm_header& header() const { return *header_; }
    uint64_t latest() const { return latest_; }
    const std::string& name() const { return name_; }

private:
    void check_count(uint32_t count, uint32_t capacity, const char* what) const {
        if (count > capacity) fail(KEPLERSHM_E_CAPACITY, "frame has {} {}, capacity is {}", count, what, capacity);
    }

    uint8_t* slot_address(uint64_t n) const {
        return segment_.data() + header_->slots_offset + (n % caps_.slot_count) * header_->slot_size;
    }

    void announce(uint64_t n) {
        // Release: pairs with the acquire loads in Reader::wait; the slot's own sequence word is what
        // makes the frame readable, latest_sequence is the hint of where to look.
        atomic_word(header_->latest_sequence).store(n, std::memory_order_release);
        beat(*header_);
        // SYNC POINT (partner: the futex word load in Reader::wait). Bumped after latest_sequence so a
        // reader that read the old word before checking latest_sequence is woken by FUTEX_WAIT's compare.
        atomic_word(header_->futex_word).fetch_add(1, std::memory_order_release);
        futex_wake_all(&header_->futex_word);
    }

    void create_generation(bool replace, uint64_t previous_latest) {
        const uint64_t size = segment_bytes(caps_);
        if (size > options_.max_segment_bytes) {
            fail(KEPLERSHM_E_NO_SPACE,
                 "segment '{}' would need {} bytes (= {} + {} slots x {} bytes) but the cap is {} bytes; lower the "
                 "capacities or raise the cap", name_, size, slots_offset_for_schema(keplershm_schema_count),
                 caps_.slot_count, KEPLERSHM_SLOT_CONTROL_SIZE + frame_geometry(caps_).frame_capacity,
                 options_.max_segment_bytes);
        }
        if (const uint64_t free_bytes = shm_free_bytes(); size > free_bytes) {
            fail(KEPLERSHM_E_NO_SPACE, "segment '{}' needs {} bytes but /dev/shm has {} free", name_, size, free_bytes);
        }
        const uint64_t generation = new_generation_id();
        const std::string temporary = fmt::format("{}.{:016x}.tmp", name_, generation);
        MappedSegment fresh = MappedSegment::create_exclusive(temporary, size, options_.mode);
        geometry_ = frame_geometry(caps_);
        auto* h = reinterpret_cast<keplershm_header*>(fresh.data());
        fill_header(*h, generation, size, previous_latest + 1);

        // Release: the header and schema are complete before a reader can see ACTIVE (and before the
        // rename below makes the segment reachable at all).
        atomic_word(h->state).store(KEPLERSHM_STATE_ACTIVE, std::memory_order_release);
        beat(*h);  // heartbeat_count 1: non-zero tells readers that this writer counts its heartbeats

        MappedSegment predecessor;
        if (replace && !segment_.mapped()) {
            try {
                predecessor = MappedSegment::open_read_write(name_);
            } catch (const Error&) {
                // Another user's dead segment: we can still replace the name, only not wake its readers.
            }
        }
        publish_segment_name(temporary, name_, replace);
        MappedSegment previous = std::exchange(segment_, std::move(fresh));
        header_ = h;
        latest_ = previous_latest;
        if (previous.mapped()) mark_replaced(previous);
        if (predecessor.mapped()) mark_replaced(predecessor);
    }

    void fill_header(keplershm_header& h, uint64_t generation, uint64_t size, uint64_t first_sequence) const {
        h.magic = KEPLERSHM_MAGIC;
        h.abi_major = KEPLERSHM_ABI_MAJOR;
        h.abi_minor = KEPLERSHM_ABI_MINOR;
        h.header_size = sizeof(keplershm_header);
        h.segment_size = size;
        h.generation = generation;
        h.writer_start_realtime_ns = realtime_ns();
        h.writer_start_monotonic_ns = monotonic_ns();
        h.heartbeat_period_ns = static_cast<uint64_t>(options_.heartbeat_period.count());
        h.segment_kind = caps_.segment_kind;
        h.writer_version = options_.writer_version;
        h.slot_count = caps_.slot_count;
        h.frame_header_size = sizeof(keplershm_frame);
        h.slot_size = KEPLERSHM_SLOT_CONTROL_SIZE + geometry_.frame_capacity;
        h.slots_offset = slots_offset_for_schema(keplershm_schema_count);
        h.section_entry_size = sizeof(keplershm_section);
        h.process_record_size = sizeof(keplershm_process);
        h.workload_record_size = sizeof(keplershm_workload);
        h.zone_record_size = sizeof(keplershm_zone_sample);
        h.cpu_record_size = sizeof(keplershm_cpu_sample);
        h.unaccounted_record_size = sizeof(keplershm_unaccounted);
        h.process_capacity = caps_.process_capacity;
        h.workload_capacity = caps_.workload_capacity;
        h.zone_capacity = caps_.zone_capacity;
        h.cpu_capacity = caps_.cpu_capacity;
        h.string_capacity = caps_.string_capacity;
        h.gpu_device_capacity = caps_.gpu_device_capacity;
        h.gpu_usage_capacity = caps_.gpu_usage_capacity;
        h.max_sections = KEPLERSHM_MAX_SECTIONS;
        h.schema_offset = KEPLERSHM_HEADER_SIZE;
        h.schema_count = keplershm_schema_count;
        h.schema_entry_size = sizeof(keplershm_field);
        h.max_segment_bytes = options_.max_segment_bytes;
        h.metric_mask = options_.metric_mask;
        h.cpu_count = options_.cpu_count;
        h.zone_count = static_cast<uint32_t>(options_.zones.size());
        h.clock_ticks_per_second = static_cast<uint32_t>(sysconf(_SC_CLK_TCK));
        h.boot_time_realtime_ns = realtime_ns() - clock_ns(CLOCK_BOOTTIME);
        set_text(h.node_name, options_.node_name);
        set_text(h.cpu_model, options_.cpu_model);
        set_text(h.platform_meter_id, options_.platform_meter_id);
        for (size_t i = 0; i < options_.zones.size(); ++i) h.zones[i] = options_.zones[i];
        h.first_sequence = first_sequence;
        std::memcpy(reinterpret_cast<uint8_t*>(&h) + h.schema_offset, keplershm_schema_table,
                    keplershm_schema_count * sizeof(keplershm_field));
    }

    void grow() {
        const uint64_t wanted = grow_to_;
        grow_to_ = 0;
        Capacities bigger = caps_;
        bigger.process_capacity = static_cast<uint32_t>(std::min<uint64_t>(
            std::max<uint64_t>(wanted + wanted / 4, uint64_t{caps_.process_capacity} * 2), UINT32_MAX / 2));
        // Shrink the step until it fits the cap; give up (keep truncating) if nothing bigger fits.
        while (bigger.process_capacity > caps_.process_capacity && segment_bytes(bigger) > options_.max_segment_bytes) {
            bigger.process_capacity = caps_.process_capacity + (bigger.process_capacity - caps_.process_capacity) / 2;
        }
        if (bigger.process_capacity <= caps_.process_capacity) {
            warn_once(fmt::format("segment '{}' cannot grow past {} processes within its cap of {} bytes; frames stay "
                                  "truncated", name_, caps_.process_capacity, options_.max_segment_bytes));
            return;
        }
        const Capacities before = caps_;
        caps_ = bigger;
        try {
            create_generation(true, latest_);
        } catch (const Error& e) {
            caps_ = before;  // no room: keep the current segment and keep flagging truncation
            geometry_ = frame_geometry(caps_);
            warn_once(fmt::format("segment '{}' cannot grow to {} processes ({}); frames stay truncated at {}", name_,
                                  bigger.process_capacity, e.what(), before.process_capacity));
        }
    }

    /// One warning per capacity: growth is retried every frame, the operator needs to hear it once.
    void warn_once(const std::string& message) {
        if (!options_.on_warning || warned_at_capacity_ == caps_.process_capacity) return;
        warned_at_capacity_ = caps_.process_capacity;
        options_.on_warning(message);
    }

    std::string name_;
    WriterOptions options_;
    Capacities caps_{};
    FrameGeometry geometry_{};
    MappedSegment segment_;
    keplershm_header* header_ = nullptr;
    uint64_t latest_ = 0;
    uint64_t grow_to_ = 0;
    uint32_t warned_at_capacity_ = 0;
    bool in_frame_ = false;
};

// ------------------------------------------------------------------------------------------------

namespace {
template <class Record>
bool append(Record* base, uint32_t capacity, uint32_t& count, const Record& record) {
    if (base == nullptr || count >= capacity) return false;
    std::memcpy(base + count, &record, sizeof record);
    ++count;
    return true;
}
}  // namespace

bool Draft::add_process(const keplershm_process& r) noexcept { return append(raw_.processes, raw_.process_capacity, raw_.process_count, r); }
bool Draft::add_workload(const keplershm_workload& r) noexcept { return append(raw_.workloads, raw_.workload_capacity, raw_.workload_count, r); }
bool Draft::add_zone(const keplershm_zone_sample& r) noexcept { return append(raw_.zones, raw_.zone_capacity, raw_.zone_count, r); }
bool Draft::add_cpu(const keplershm_cpu_sample& r) noexcept { return append(raw_.cpus, raw_.cpu_capacity, raw_.cpu_count, r); }
bool Draft::add_estimate(const keplershm_estimate& r) noexcept { return append(raw_.estimates, raw_.estimate_capacity, raw_.estimate_count, r); }
bool Draft::add_gpu_device(const keplershm_gpu_device& r) noexcept {
    return append(raw_.gpu_devices, raw_.gpu_device_capacity, raw_.gpu_device_count, r);
}
bool Draft::add_gpu_usage(const keplershm_gpu_usage& r) noexcept {
    return append(raw_.gpu_usage, raw_.gpu_usage_capacity, raw_.gpu_usage_count, r);
}

std::optional<uint32_t> Draft::add_string(std::string_view text) noexcept {
    if (raw_.strings == nullptr || text.size() > raw_.string_capacity - raw_.string_used) return std::nullopt;
    const uint32_t offset = raw_.string_used;
    std::memcpy(raw_.strings + offset, text.data(), text.size());
    raw_.string_used += static_cast<uint32_t>(text.size());
    return offset;
}

Writer::Writer(const std::string& name, const WriterOptions& options) : impl_(std::make_unique<WriterImpl>(name, options)) {}
Writer::Writer(Writer&&) noexcept = default;
Writer& Writer::operator=(Writer&&) noexcept = default;
Writer::~Writer() = default;
Draft Writer::begin() { return impl_->begin(); }
void Writer::commit(Draft& draft) { impl_->commit(draft); }
void Writer::heartbeat() { impl_->heartbeat(); }
void Writer::set_overhead(uint64_t cpu_time_ns, uint64_t rss_bytes) { impl_->set_overhead(cpu_time_ns, rss_bytes); }
const keplershm_header& Writer::header() const { return impl_->header(); }
uint64_t Writer::generation() const { return impl_->header().generation; }
uint64_t Writer::latest_sequence() const { return impl_->latest(); }
const std::string& Writer::name() const { return impl_->name(); }
void Writer::close(bool keep_name) { impl_->close(keep_name); }

}  // namespace keplershm
