// A live segment followed by name, the way a daemon reads it: waited for until it appears, read frame by
// frame through one keplershm::Reader (which follows new writer generations), rejected frames stepped
// over and counted, the reader reopened after an error it cannot recover from. What the follower is doing
// (waiting, reading, a new generation, a retired or stale writer, a rejected frame) is told to its owner
// once per change, as a sentence for the owner's log: kepler-estimate and kepler-feed say the same thing.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "keplershm/keplershm.hpp"

namespace keplershm {

/// A change in what a Follower is doing.
struct FollowerEvent {
    enum class Kind {
        waiting,         // the segment is not there, or cannot be opened (yet)
        reading,         // opened: frames follow
        new_generation,  // the writer restarted or grew the segment; the reader moved to the new one
        retired,         // the writer stopped cleanly; waiting for a successor
        stale,           // the writer's heartbeat stood still for the heartbeat timeout
        beats_again,     // a stale writer showed life again
        rejected_frame,  // a frame failed validation and was stepped over (the first few only)
        reopening,       // the reader failed in a way only reopening the name can recover from
    };
    Kind kind = Kind::waiting;
    bool warning = false;  // worth a warning rather than a note
    std::string message;   // one sentence naming the segment
};

/// Not thread-safe: one thread reads through it.
class Follower {
public:
    enum class Result { frame, idle };
    using EventSink = std::function<void(const FollowerEvent&)>;

    Follower(std::string name, ReaderOptions options, EventSink on_event);

    /// The next frame (a private copy, valid until the next call), or idle after `timeout` with nothing
    /// new (shorter while the segment is missing). Frames lost since the previous frame are in view.missed().
    Result next(FrameView& view, std::chrono::milliseconds timeout);

    /// The open reader (nullptr while waiting for the segment): its schema, for instance.
    [[nodiscard]] Reader* reader() noexcept { return reader_ ? &*reader_ : nullptr; }
    /// The segment as of the last next() (zeroed while there is no reader).
    [[nodiscard]] const keplershm_segment_info& info() const noexcept { return info_; }
    /// Frames that failed validation, and errors that made the follower reopen the segment.
    [[nodiscard]] uint64_t rejected_frames() const noexcept { return rejected_; }
    /// New generations the current reader moved to.
    [[nodiscard]] uint64_t reattaches() const noexcept { return info_.reattach_count; }

private:
    enum class WriterState { live, retired, stale };

    bool open();
    /// Tells the owner what changed since the last look at the writer, once per change.
    void report_writer();
    void reject(const Error& error);
    void tell(FollowerEvent::Kind kind, bool warning, std::string message);

    std::string name_;
    ReaderOptions options_;
    EventSink on_event_;
    std::optional<Reader> reader_;
    keplershm_segment_info info_{};
    bool said_waiting_ = false;
    uint64_t rejected_ = 0;
    uint64_t reattaches_seen_ = 0;
    WriterState writer_state_ = WriterState::live;
};

}  // namespace keplershm
