// The feed's one reader of the segment: a thread that copies every frame out of shared memory (read-only
// and unprivileged, through keplershm::Follower as kepler-estimate reads it), follows the collector across
// restarts, and hands each frame to a sink as an immutable Snapshot that any number of subscribers share.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "keplershm/follower.hpp"
#include "keplershm/keplershm.hpp"

namespace kepler::feed {

/// Header facts and field schema of one writer generation (private copies).
struct SegmentFacts {
    keplershm_header header{};
    std::vector<keplershm_field> schema;
};

/// One frame, copied out of the segment: never changes after it is built.
struct Snapshot {
    struct Section {
        uint32_t id = 0;
        uint32_t stride = 0;
        uint32_t count = 0;
        std::vector<uint8_t> bytes;  // count × stride
    };
    uint64_t sequence = 0;
    uint64_t generation = 0;
    uint64_t missed = 0;  // frames the feed's reader lost just before this one
    std::chrono::steady_clock::time_point read_at;  // when the feed read it (bounds waits for its estimates)
    keplershm_frame header{};
    std::shared_ptr<const SegmentFacts> segment;
    std::vector<Section> sections;  // the known sections present in the frame

    [[nodiscard]] const Section* find(uint32_t id) const noexcept;
};

using SnapshotPtr = std::shared_ptr<const Snapshot>;

/// What the reader knows about the segment right now, for Describe().
struct ReaderStatus {
    bool attached = false;
    std::shared_ptr<const SegmentFacts> segment;
    uint64_t latest_sequence = 0;
    uint32_t writer_state = 0;
    bool writer_stale = false;  // its heartbeat stood still for the heartbeat timeout (PROTOCOL.md §1.3)
    uint64_t frames_read = 0;
    uint64_t frames_missed = 0;
    uint64_t generations_followed = 0;
};

/// Runs the reader thread. Thread-safe: status() may be called from any thread.
class FrameReader {
public:
    /// `sink` is called on the reader thread for every frame, in order; it must not block.
    FrameReader(std::string shm_name, std::function<void(SnapshotPtr)> sink);
    ~FrameReader();
    FrameReader(const FrameReader&) = delete;
    FrameReader& operator=(const FrameReader&) = delete;

    /// Attaches once (catching up on the ring) before it returns, then reads on a thread of its own.
    void start();
    void stop();
    [[nodiscard]] ReaderStatus status() const;
    /// Called on the reader thread about every 200 ms even without frames (housekeeping of the fan-out).
    void set_tick(std::function<void()> tick) { tick_ = std::move(tick); }

private:
    void run();
    /// Reads one frame (or waits up to a slice for one) and hands it to the sink.
    bool read_one(std::chrono::milliseconds timeout);
    SnapshotPtr snapshot_of(const keplershm::FrameView& view);
    std::shared_ptr<const SegmentFacts> facts_of(const keplershm::FrameView& view);

    std::string name_;
    std::function<void(SnapshotPtr)> sink_;
    std::function<void()> tick_;
    std::atomic<bool> stopping_{false};
    std::thread thread_;
    keplershm::Follower follower_;  // reader thread only (start() before the thread)

    mutable std::mutex mutex_;  // guards status_
    ReaderStatus status_;
};

}  // namespace kepler::feed
