#include "read/frame_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "support/log/log.hpp"

namespace kepler::feed {

namespace {

constexpr int32_t kSliceMs = 200;  // longest wait inside the library: bounds stop() and tick latency
constexpr uint32_t kKnownSections[] = {KEPLERSHM_SECTION_PROCESSES, KEPLERSHM_SECTION_WORKLOADS,
                                       KEPLERSHM_SECTION_ZONES,     KEPLERSHM_SECTION_CPUS,
                                       KEPLERSHM_SECTION_STRINGS,   KEPLERSHM_SECTION_UNACCOUNTED,
                                       KEPLERSHM_SECTION_ESTIMATES, KEPLERSHM_SECTION_GPU_DEVICES,
                                       KEPLERSHM_SECTION_GPU_USAGE};

keplershm_view empty_view() {
    keplershm_view view{};
    view.sz = sizeof view;
    return view;
}

std::string error_text(int rc) {
    const std::string detail = keplershm_last_error_detail();
    return detail.empty() ? keplershm_strerror(rc) : fmt::format("{}: {}", keplershm_strerror(rc), detail);
}

}  // namespace

const Snapshot::Section* Snapshot::find(uint32_t id) const noexcept {
    for (const Section& s : sections)
        if (s.id == id) return &s;
    return nullptr;
}

FrameReader::FrameReader(std::string shm_name, std::function<void(SnapshotPtr)> sink)
    : name_(std::move(shm_name)), sink_(std::move(sink)) {}

FrameReader::~FrameReader() { stop(); }

// The first attach runs on the caller's thread: a feed that starts listening after start() already holds
// the ring's frames, so a subscriber resuming from its last sequence right after a restart finds them.
void FrameReader::start() {
    attach();
    thread_ = std::thread([this] { run(); });
}

void FrameReader::stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
    if (reader_ != nullptr) keplershm_reader_close(reader_);
    reader_ = nullptr;
}

ReaderStatus FrameReader::status() const {
    std::lock_guard lock(mutex_);
    return status_;
}

void FrameReader::run() {
    while (!stopping_) {
        if (reader_ == nullptr && !attach()) {
            if (tick_) tick_();
            std::this_thread::sleep_for(std::chrono::milliseconds(100));  // shm_open is cheap: catch frame 1
            continue;
        }
        read_one();
        if (tick_) tick_();
    }
}

bool FrameReader::attach() {
    const int rc = keplershm_reader_open(name_.c_str(), nullptr, &reader_);
    if (rc != KEPLERSHM_OK) {
        reader_ = nullptr;
        if (!said_waiting_) log_info("waiting for segment '{}' ({})", name_, error_text(rc));
        said_waiting_ = true;
        return false;
    }
    said_waiting_ = false;
    log_info("reading segment '{}'", name_);
    uint64_t latest = 0;
    keplershm_reader_latest(reader_, &latest);
    catch_up(latest);
    return true;
}

// Frames the ring still holds when the feed attaches (a restarted feed) are read first, so that a
// subscriber resuming from its last sequence gets them. The ring holds latest − slots + 1 .. latest,
// one fewer while a write is in progress.
void FrameReader::catch_up(uint64_t upto) {
    prefill_upto_ = upto;
    if (upto == 0) return;
    keplershm_segment_info info{};
    info.sz = sizeof info;
    if (keplershm_reader_info(reader_, &info) != KEPLERSHM_OK) return;
    const uint64_t held = info.slot_count > 1 ? info.slot_count - 1 : 1;
    forward_held(std::max<uint64_t>({upto > held ? upto - held + 1 : 1, info.header->first_sequence, 1}), upto);
}

void FrameReader::forward_held(uint64_t first, uint64_t end) {
    for (uint64_t n = first; n < end && !stopping_; ++n) {
        keplershm_view view = empty_view();
        if (keplershm_reader_copy(reader_, n, &view) == KEPLERSHM_OK) sink_(snapshot_of(view));
    }
}

void FrameReader::read_one() {
    keplershm_view view = empty_view();
    const int rc = keplershm_reader_next(reader_, kSliceMs, &view);
    keplershm_segment_info info{};
    info.sz = sizeof info;
    if (keplershm_reader_info(reader_, &info) == KEPLERSHM_OK) {
        std::lock_guard lock(mutex_);
        status_.latest_sequence = info.latest_sequence;
        status_.writer_state = info.state;
        status_.writer_stale = info.writer_stale != 0;
    }
    if (rc == KEPLERSHM_E_TIMEOUT || rc == KEPLERSHM_E_WRITER_GONE) return;  // the library looks for a successor
    if (rc == KEPLERSHM_E_CORRUPT) {
        log_warn("segment '{}': skipped a corrupt frame ({})", name_, error_text(rc));
        return;
    }
    if (rc != KEPLERSHM_OK) return detach(error_text(rc));
    SnapshotPtr snapshot = snapshot_of(view);
    // next() starts at the newest frame: frames published between catch_up() and it are copied now
    // (the snapshot above owns its bytes, so reusing the reader's copy buffer is safe).
    const uint64_t gap_from = prefill_upto_;
    prefill_upto_ = 0;
    if (gap_from != 0 && snapshot->sequence > gap_from && snapshot->generation == facts_of(view)->header.generation) {
        forward_held(gap_from, snapshot->sequence);
    }
    sink_(std::move(snapshot));
}

std::shared_ptr<const SegmentFacts> FrameReader::facts_of(const keplershm_view& view) {
    {
        std::lock_guard lock(mutex_);
        if (status_.segment && status_.segment->header.generation == view.generation) return status_.segment;
    }
    auto facts = std::make_shared<SegmentFacts>();
    std::memcpy(&facts->header, view.segment, sizeof facts->header);
    uint32_t count = 0;
    if (keplershm_view_schema(reader_, &view, nullptr, 0, &count) == KEPLERSHM_OK) {
        facts->schema.resize(count);
        keplershm_view_schema(reader_, &view, facts->schema.data(), count, &count);
        facts->schema.resize(std::min<size_t>(count, facts->schema.size()));
    }
    std::lock_guard lock(mutex_);
    if (status_.segment) {
        ++status_.generations_followed;
        log_info("segment '{}' has a new generation {:#x} (its writer restarted or grew); "
                 "following it", name_, view.generation);
    }
    status_.segment = facts;
    status_.attached = true;
    return facts;
}

SnapshotPtr FrameReader::snapshot_of(const keplershm_view& view) {
    auto snapshot = std::make_shared<Snapshot>();
    snapshot->sequence = view.sequence;
    snapshot->generation = view.generation;
    snapshot->missed = view.missed;
    snapshot->read_at = std::chrono::steady_clock::now();
    std::memcpy(&snapshot->header, view.frame, sizeof snapshot->header);
    snapshot->segment = facts_of(view);
    for (const uint32_t id : kKnownSections) {
        const void* records = nullptr;
        uint32_t count = 0, stride = 0;
        if (keplershm_view_section(&view, id, &records, &count, &stride) != KEPLERSHM_OK || records == nullptr) continue;
        Snapshot::Section section{id, stride, count, {}};
        const auto* bytes = static_cast<const uint8_t*>(records);
        section.bytes.assign(bytes, bytes + static_cast<size_t>(count) * stride);
        snapshot->sections.push_back(std::move(section));
    }
    std::lock_guard lock(mutex_);
    ++status_.frames_read;
    status_.frames_missed += view.missed;
    return snapshot;
}

void FrameReader::detach(const std::string& why) {
    log_warn("segment '{}': {}; re-opening it", name_, why);
    keplershm_reader_close(reader_);
    reader_ = nullptr;
    std::lock_guard lock(mutex_);
    status_.attached = false;
}

}  // namespace kepler::feed
