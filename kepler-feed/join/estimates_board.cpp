#include "join/estimates_board.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <tuple>

#include "keplershm/keplershm.hpp"

namespace kepler_feed {

namespace {

constexpr uint32_t kNoIndex = 0xffffffffu;
constexpr double kMaxWatts = 1e6;     // PROTOCOL.md §8: at most 10^6 W over the interval
constexpr size_t kKeptAnswers = 64;   // per source: answers to the newest 64 frames (the history's usual size)

bool plausible(double value, double bound) { return std::isfinite(value) && value >= 0 && value <= bound; }

bool known_zone_kind(uint32_t kind) { return kind >= KEPLERSHM_ZONE_PACKAGE && kind <= KEPLERSHM_ZONE_OTHER; }

bool platform_kind(uint32_t kind) { return kind == KEPLERSHM_ZONE_PSYS || kind == KEPLERSHM_ZONE_PLATFORM; }

/// One row checked against the rules that need no other row; "" when fine.
std::string row_refusal(const keplershm_estimate& r, uint32_t i, const keplershm_header& h, double max_joules) {
    if (!plausible(r.power_watts, kMaxWatts) || !plausible(r.energy_joules, max_joules)) {
        return fmt::format("row {}: power_watts {} / energy_joules {} is not a finite non-negative number within {} W",
                           i, r.power_watts, r.energy_joules, kMaxWatts);
    }
    if (r.zone_index == kNoIndex) return "";
    if (r.zone_index >= std::min<uint32_t>(h.zone_count, KEPLERSHM_MAX_ZONES)) {
        return fmt::format("row {}: zone_index {} but the segment declares {} zone(s)", i, r.zone_index, h.zone_count);
    }
    if (!known_zone_kind(h.zones[r.zone_index].kind)) {
        return fmt::format("row {}: zone {} has unknown kind {}", i, r.zone_index, h.zones[r.zone_index].kind);
    }
    return "";
}

}  // namespace

std::string refusal(const Snapshot& estimates, uint32_t max_rows) {
    const keplershm_header& h = estimates.segment->header;
    const keplershm_frame& f = estimates.header;
    if (h.segment_kind != KEPLERSHM_SEGMENT_ESTIMATES) {
        return fmt::format("the segment is of kind {}, not an estimates segment (kind {})", h.segment_kind,
                           static_cast<int>(KEPLERSHM_SEGMENT_ESTIMATES));
    }
    if (f.producer_generation == 0 || f.producer_sequence == 0) return "the frame answers no collector frame (producer_generation or producer_sequence is 0)";
    const Snapshot::Section* rows = estimates.find(KEPLERSHM_SECTION_ESTIMATES);
    if (rows == nullptr) return "the frame has no estimates section";
    if (rows->count > max_rows) return fmt::format("{} rows, more than the {} accepted", rows->count, max_rows);
    if (rows->stride < sizeof(keplershm_estimate) || rows->bytes.size() < static_cast<size_t>(rows->count) * rows->stride) {
        return fmt::format("estimates section of stride {} for {} rows in {} bytes", rows->stride, rows->count, rows->bytes.size());
    }
    // Energy over the answered interval (copied from the collector frame); without one, a megawatt for 1000 s.
    const double seconds = f.interval_end_ns > f.interval_start_ns ? static_cast<double>(f.interval_end_ns - f.interval_start_ns) / 1e9 : 1000;
    std::set<std::tuple<uint32_t, uint32_t, uint32_t, uint64_t>> keys;
    bool node_row = false, platform_row = false;
    for (uint32_t i = 0; i < rows->count; ++i) {
        keplershm_estimate r;  // one copy: every field is read once
        std::memcpy(&r, rows->bytes.data() + static_cast<size_t>(i) * rows->stride, sizeof r);
        if (std::string why = row_refusal(r, i, h, kMaxWatts * seconds); !why.empty()) return why;
        if (!keys.emplace(r.zone_index, r.workload_index, r.pid, r.start_time_ticks).second) {
            return fmt::format("row {}: a second row for zone {:#x}, workload {:#x}, process {}", i, r.zone_index, r.workload_index, r.pid);
        }
        if (r.workload_index != kNoIndex || r.pid != 0) continue;
        if (r.zone_index == kNoIndex) node_row = true;
        else platform_row |= platform_kind(h.zones[r.zone_index].kind);
    }
    if (node_row && platform_row) return "both a whole-node row and a platform zone row (the node would count twice)";
    return "";
}

struct EstimatesBoard::Source {
    std::string shm_name;
    std::unique_ptr<FrameReader> reader;
    std::deque<AnswerPtr> recent;  // newest last
    std::string model, version;
    uint64_t answers = 0, rejected = 0;
    std::string last_rejection;
    FrameId answered;
};

EstimatesBoard::EstimatesBoard(const std::vector<std::string>& segments, std::chrono::milliseconds wait) : wait_(wait) {
    for (const std::string& name : segments) {
        auto source = std::make_unique<Source>();
        source->shm_name = name;
        Source* s = source.get();
        source->reader = std::make_unique<FrameReader>(name, [this, s](SnapshotPtr estimates) { add(*s, estimates); });
        sources_.push_back(std::move(source));
    }
}

EstimatesBoard::~EstimatesBoard() { stop(); }

void EstimatesBoard::start() {
    for (const auto& s : sources_) s->reader->start();
}

void EstimatesBoard::stop() {
    for (const auto& s : sources_) s->reader->stop();
}

AnswerPtr EstimatesBoard::find(const Source& source, const FrameId& frame) const {
    for (auto it = source.recent.rbegin(); it != source.recent.rend(); ++it)
        if ((*it)->frame == frame) return *it;
    return nullptr;
}

// A source that left the previous frame unanswered (stopped, failing, far behind) is not waited for: a
// dead producer costs the bound once, not on every frame. It is waited for again once it answers.
bool EstimatesBoard::keeps_up(const Source& source, const FrameId& frame) const {
    return frame.sequence > 1 && find(source, FrameId{frame.generation, frame.sequence - 1}) != nullptr;
}

// Runs on the source's reader thread.
void EstimatesBoard::add(Source& source, const SnapshotPtr& estimates) {
    const std::string why = refusal(*estimates);
    const FrameId id{estimates->header.producer_generation, estimates->header.producer_sequence};
    // SYNC POINT: partner answers_for(): the answer is kept and the waiters woken under the same mutex,
    // so a handler that found no answer is already waiting when notify_all() runs.
    std::lock_guard lock(mutex_);
    source.model = std::string(keplershm::get_text(estimates->segment->header.node_name));
    source.version = std::string(keplershm::get_text(estimates->segment->header.cpu_model));
    std::string rejection = why;
    if (rejection.empty() && find(source, id) != nullptr) rejection = "a second answer for the frame";
    if (!rejection.empty()) {
        ++source.rejected;
        // Each reason is logged once in a row: a hostile producer must not flood the log.
        if (rejection != source.last_rejection) {
            fmt::print(stderr, "kepler-feed: estimates segment '{}': refused its answer to frame {}: {}\n", source.shm_name,
                       id.sequence, rejection);
        }
        source.last_rejection = rejection;
        return;
    }
    source.recent.push_back(std::make_shared<const Answer>(Answer{id, estimates}));
    while (source.recent.size() > kKeptAnswers) source.recent.pop_front();
    ++source.answers;
    source.answered = id;
    arrived_.notify_all();
}

std::vector<SourceAnswer> EstimatesBoard::answers_for(const Snapshot& frame) {
    const FrameId id{frame.generation, frame.sequence};
    std::chrono::nanoseconds bound = wait_;
    if (frame.header.interval_end_ns > frame.header.interval_start_ns) {
        bound = std::min(bound, std::chrono::nanoseconds((frame.header.interval_end_ns - frame.header.interval_start_ns) / 4));
    }
    std::vector<ReaderStatus> readers;  // read before mutex_ is taken: a FrameReader's lock is never nested in it
    for (const auto& s : sources_) readers.push_back(s->reader->status());
    const auto alive = [&](size_t i) {
        return readers[i].attached && readers[i].writer_state == KEPLERSHM_STATE_ACTIVE && !readers[i].writer_stale;
    };
    std::unique_lock lock(mutex_);
    std::vector<bool> awaited(sources_.size());
    for (size_t i = 0; i < sources_.size(); ++i) awaited[i] = alive(i) && keeps_up(*sources_[i], id);
    // SYNC POINT: partner add(): the predicate is checked under mutex_ and the wait releases it atomically.
    arrived_.wait_until(lock, frame.read_at + bound, [&] {
        for (size_t i = 0; i < sources_.size(); ++i)
            if (awaited[i] && find(*sources_[i], id) == nullptr) return false;
        return true;
    });
    std::vector<SourceAnswer> out;
    for (size_t i = 0; i < sources_.size(); ++i) {
        SourceAnswer a{sources_[i]->shm_name, find(*sources_[i], id), {}};
        if (a.answer == nullptr) {
            a.reason = !readers[i].attached                                  ? "the estimates segment is not there (yet)"
                       : readers[i].writer_state != KEPLERSHM_STATE_ACTIVE ? "its producer stopped"
                       : readers[i].writer_stale                           ? "its producer's heartbeat stands still"
                       : awaited[i] ? fmt::format("no answer within {} ms of the frame", std::chrono::duration_cast<std::chrono::milliseconds>(bound).count())
                                    : "no answer (the previous frame was not answered either: not waited for)";
        }
        out.push_back(std::move(a));
    }
    return out;
}

std::vector<SourceStatus> EstimatesBoard::status() const {
    std::vector<SourceStatus> out;
    for (const auto& s : sources_) out.push_back(SourceStatus{s->shm_name, s->reader->status(), {}, {}, 0, 0, {}, {}});
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < sources_.size(); ++i) {
        const Source& s = *sources_[i];
        out[i].model = s.model;
        out[i].version = s.version;
        out[i].answers = s.answers;
        out[i].rejected = s.rejected;
        out[i].last_rejection = s.last_rejection;
        out[i].answered = s.answered;
    }
    return out;
}

}  // namespace kepler_feed
