// Estimates segments joined to the frames (--estimates): each source is read by a FrameReader of its own
// (one thread per source: a slow or dead producer never touches the collector's reader), its answers are
// validated as untrusted input (PROTOCOL.md §8) and kept, keyed by the collector frame they answer.
// A subscriber's handler asks for the answers to the frame it is about to send and waits for them at
// most until a bound after the feed read that frame: never the reader thread, never other subscribers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "read/frame_reader.hpp"

namespace kepler::feed {

/// A collector frame: its writer generation and sequence (a sequence alone is ambiguous: a collector
/// started afresh numbers from 1 again). Plain value.
struct FrameId {
    uint64_t generation = 0;
    uint64_t sequence = 0;
    bool operator==(const FrameId&) const = default;
};

/// A validated answer: the estimates frame as read. Never changes after it is built.
struct Answer {
    FrameId frame;         // the collector frame it answers
    SnapshotPtr estimates;  // the estimates frame (its segment facts: model, version, zones)
};
using AnswerPtr = std::shared_ptr<const Answer>;

/// One source's answer to one frame, or why there is none. Plain value.
struct SourceAnswer {
    std::string shm_name;
    AnswerPtr answer;       // null: missing
    std::string reason;     // why missing
};

/// What Describe() shows of one source. Plain value.
struct SourceStatus {
    std::string shm_name;
    ReaderStatus reader;
    std::string model, version;
    uint64_t answers = 0, rejected = 0;
    std::string last_rejection;
    FrameId answered;  // newest collector frame answered
};

/// Answers of one estimates frame checked against PROTOCOL.md §8's consumer rules: "" when it may be
/// served, else the reason it is refused. `max_rows`: more is refused before a row is looked at.
[[nodiscard]] std::string refusal(const Snapshot& estimates, uint32_t max_rows = 65536);

/// Thread-safe.
class EstimatesBoard {
public:
    /// `wait`: longest wait for answers after the feed read a frame (also capped at a quarter of its interval).
    EstimatesBoard(const std::vector<std::string>& segments, std::chrono::milliseconds wait);
    ~EstimatesBoard();
    EstimatesBoard(const EstimatesBoard&) = delete;
    EstimatesBoard& operator=(const EstimatesBoard&) = delete;

    void start();
    void stop();
    [[nodiscard]] bool empty() const noexcept { return sources_.empty(); }
    [[nodiscard]] std::chrono::milliseconds wait_bound() const noexcept { return wait_; }

    /// One entry per source, in configuration order: its answer to `frame`, waiting up to
    /// `frame.read_at` + the bound for sources that keep up (a source whose writer is gone, stale or absent,
    /// or that left the previous frame unanswered, is not waited for).
    std::vector<SourceAnswer> answers_for(const Snapshot& frame);
    [[nodiscard]] std::vector<SourceStatus> status() const;

private:
    struct Source;
    void add(Source& source, const SnapshotPtr& estimates);
    /// Caller holds mutex_.
    [[nodiscard]] AnswerPtr find(const Source& source, const FrameId& frame) const;
    [[nodiscard]] bool keeps_up(const Source& source, const FrameId& frame) const;

    std::vector<std::unique_ptr<Source>> sources_;
    std::chrono::milliseconds wait_;
    mutable std::mutex mutex_;  // guards every Source's answers and counters
    std::condition_variable arrived_;
};

}  // namespace kepler::feed
