#include "read/frame_reader.hpp"

#include "support/log/log.hpp"

namespace kepler::feed {

namespace {

constexpr int32_t kSliceMs = 200;  // longest wait inside the library: bounds stop() and tick latency
constexpr uint32_t kKnownSections[] = {KEPLERSHM_SECTION_PROCESSES, KEPLERSHM_SECTION_WORKLOADS,
                                       KEPLERSHM_SECTION_ZONES,     KEPLERSHM_SECTION_CPUS,
                                       KEPLERSHM_SECTION_STRINGS,   KEPLERSHM_SECTION_UNACCOUNTED,
                                       KEPLERSHM_SECTION_ESTIMATES, KEPLERSHM_SECTION_GPU_DEVICES,
                                       KEPLERSHM_SECTION_GPU_USAGE};

keplershm::ReaderOptions relay_options() {
    keplershm::ReaderOptions options;
    // Subscribers resume from the last sequence they saw: a (re)started feed first hands on every frame
    // the ring still holds, oldest first.
    options.start = keplershm::ReaderOptions::Start::oldest_held;
    return options;
}

void log_event(const keplershm::FollowerEvent& event) {
    log(event.warning ? LogLevel::warn : LogLevel::info, "{}", event.message);
}

}  // namespace

const Snapshot::Section* Snapshot::find(uint32_t id) const noexcept {
    for (const Section& s : sections)
        if (s.id == id) return &s;
    return nullptr;
}

FrameReader::FrameReader(std::string shm_name, std::function<void(SnapshotPtr)> sink)
    : name_(std::move(shm_name)), sink_(std::move(sink)), follower_(name_, relay_options(), log_event) {}

FrameReader::~FrameReader() { stop(); }

// The first frames are read on the caller's thread: a feed that starts listening after start() already
// holds the ring's frames, so a subscriber resuming from its last sequence right after a restart finds them.
void FrameReader::start() {
    while (!stopping_ && read_one(std::chrono::milliseconds(0))) {
    }
    thread_ = std::thread([this] { run(); });
}

void FrameReader::stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
}

ReaderStatus FrameReader::status() const {
    std::lock_guard lock(mutex_);
    return status_;
}

void FrameReader::run() {
    while (!stopping_) {
        read_one(std::chrono::milliseconds(kSliceMs));
        if (tick_) tick_();
    }
}

bool FrameReader::read_one(std::chrono::milliseconds timeout) {
    keplershm::FrameView view;
    const bool got = follower_.next(view, timeout) == keplershm::Follower::Result::frame;
    const keplershm_segment_info& info = follower_.info();
    {
        std::lock_guard lock(mutex_);
        status_.attached = follower_.reader() != nullptr && status_.segment != nullptr;
        status_.latest_sequence = info.latest_sequence;
        status_.writer_state = info.state;
        status_.writer_stale = info.writer_stale != 0;
    }
    if (got) sink_(snapshot_of(view));
    return got;
}

std::shared_ptr<const SegmentFacts> FrameReader::facts_of(const keplershm::FrameView& view) {
    {
        std::lock_guard lock(mutex_);
        if (status_.segment && status_.segment->header.generation == view.generation()) return status_.segment;
    }
    auto facts = std::make_shared<SegmentFacts>();
    facts->header = view.segment();
    facts->schema = follower_.reader()->schema();  // copies come from the generation the reader is on
    std::lock_guard lock(mutex_);
    if (status_.segment) ++status_.generations_followed;
    status_.segment = facts;
    status_.attached = true;
    return facts;
}

SnapshotPtr FrameReader::snapshot_of(const keplershm::FrameView& view) {
    auto snapshot = std::make_shared<Snapshot>();
    snapshot->sequence = view.sequence();
    snapshot->generation = view.generation();
    snapshot->missed = view.missed();
    snapshot->read_at = std::chrono::steady_clock::now();
    snapshot->header = view.header();
    snapshot->segment = facts_of(view);
    for (const uint32_t id : kKnownSections) {
        const keplershm_section* found = view.find_section(id);
        if (found == nullptr) continue;
        Snapshot::Section section{id, found->stride, found->count, {}};
        const uint8_t* bytes = view.raw().base + found->offset;
        section.bytes.assign(bytes, bytes + static_cast<size_t>(found->count) * found->stride);
        snapshot->sections.push_back(std::move(section));
    }
    std::lock_guard lock(mutex_);
    ++status_.frames_read;
    status_.frames_missed += view.missed();
    return snapshot;
}

}  // namespace kepler::feed
