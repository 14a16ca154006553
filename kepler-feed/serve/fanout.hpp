// Fan-out from the one reader thread to the subscribers. Each subscriber has a bounded queue; the
// reader only appends to queues under short locks and never waits for a subscriber, so a slow one
// cannot slow the others, the reader or the collector. A subscriber whose queue is full is dropped:
// its handler ends the stream with RESOURCE_EXHAUSTED.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>

#include "read/frame_reader.hpp"
#include "select/selection.hpp"

namespace kepler::feed {

/// One subscriber's queue, shared by the reader thread (producer) and its RPC handler (consumer).
/// Thread-safe.
class Subscriber {
public:
    enum class Next { frame, idle, dropped, stopped };

    /// Waits up to `wait` for the next frame.
    Next pop(SnapshotPtr& out, std::chrono::milliseconds wait);
    /// Why it was dropped (after pop returned dropped).
    [[nodiscard]] std::string drop_reason();

private:
    friend class Fanout;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<SnapshotPtr> queue_;
    size_t limit_ = 0;
    bool dropped_ = false;
    bool stopped_ = false;
    bool cancelled_ = false;
    std::string drop_reason_;
    std::chrono::steady_clock::time_point dropped_at_;
    grpc::ServerContext* context_ = nullptr;  // valid until Fanout::unsubscribe
};

/// Thread-safe.
class Fanout {
public:
    explicit Fanout(const Limits& limits) : limits_(limits) {}

    /// Reader thread: keeps the frame in the history and queues it for every subscriber.
    void publish(const SnapshotPtr& snapshot);
    /// Reader thread: a dropped subscriber whose client does not read leaves its handler blocked in a
    /// write; after a grace period its call is cancelled so it gives back its slot.
    void tick();

    struct Start {
        std::shared_ptr<Subscriber> subscriber;  // null when refused
        grpc::StatusCode refusal = grpc::StatusCode::OK;
        std::string error;
        uint64_t gap = 0;  // frames between from_sequence and the first frame queued that the feed no longer held
    };
    /// Registers a subscriber and queues the frames it asked for from the history.
    Start subscribe(uint64_t from_sequence, grpc::ServerContext* context);
    void unsubscribe(const std::shared_ptr<Subscriber>& subscriber);
    /// Wakes every subscriber with `stopped` (server shutdown).
    void stop();

    [[nodiscard]] uint32_t subscribers();
    [[nodiscard]] uint64_t dropped_total();
    /// Oldest frame a subscriber can start from (0: none held).
    [[nodiscard]] uint64_t oldest_sequence();
    [[nodiscard]] uint32_t history_frames();

private:
    void queue_or_drop(Subscriber& subscriber, const SnapshotPtr& snapshot);

    Limits limits_;
    std::mutex mutex_;  // guards everything below; taken before a Subscriber's mutex, never after
    std::vector<std::shared_ptr<Subscriber>> subscribers_;
    std::deque<SnapshotPtr> history_;
    uint64_t dropped_total_ = 0;
    bool stopped_ = false;
};

}  // namespace kepler::feed
