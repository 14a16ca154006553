#include "join/estimates_board.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "keplershm/estimates.hpp"
#include "keplershm/keplershm.hpp"
#include "support/log/log.hpp"

namespace kepler::feed {

namespace {

constexpr size_t kKeptAnswers = 64;   // per source: answers to the newest 64 frames (the history's usual size)

}  // namespace

std::string refusal(const Snapshot& estimates, uint32_t max_rows) {
    const Snapshot::Section* rows = estimates.find(KEPLERSHM_SECTION_ESTIMATES);
    if (rows == nullptr) {
        std::string why = keplershm::estimates_refusal(estimates.segment->header, estimates.header, {}, max_rows);
        return why.empty() ? "the frame has no estimates section" : why;
    }
    // The reader's copy of the section: its rows must be where the directory says (PROTOCOL.md §8's own
    // rules, below, need whole rows).
    if (rows->count <= max_rows &&
        (rows->stride < sizeof(keplershm_estimate) || rows->bytes.size() < static_cast<size_t>(rows->count) * rows->stride)) {
        return fmt::format("estimates section of stride {} for {} rows in {} bytes", rows->stride, rows->count, rows->bytes.size());
    }
    const keplershm::Records<keplershm_estimate> records(rows->bytes.data(), rows->count, rows->stride);
    return keplershm::estimates_refusal(estimates.segment->header, estimates.header, records, max_rows);
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
            log_warn("estimates segment '{}': refused its answer to frame {}: {}", source.shm_name,
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

}  // namespace kepler::feed
