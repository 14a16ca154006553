#include "serve/fanout.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "support/log/log.hpp"

namespace kepler::feed {

Subscriber::Next Subscriber::pop(SnapshotPtr& out, std::chrono::milliseconds wait) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, wait, [&] { return dropped_ || stopped_ || !queue_.empty(); });
    if (dropped_) return Next::dropped;
    if (stopped_) return Next::stopped;
    if (queue_.empty()) return Next::idle;
    out = std::move(queue_.front());
    queue_.pop_front();
    return Next::frame;
}

std::string Subscriber::drop_reason() {
    std::lock_guard lock(mutex_);
    return drop_reason_;
}

void Fanout::queue_or_drop(Subscriber& s, const SnapshotPtr& snapshot) {
    std::lock_guard lock(s.mutex_);
    if (s.dropped_) return;
    if (s.queue_.size() >= s.limit_) {
        s.dropped_ = true;
        s.dropped_at_ = std::chrono::steady_clock::now();
        s.drop_reason_ = fmt::format(
            "subscriber fell {} frames behind (at frame {}): dropped so that it cannot slow the feed; read faster, "
            "select fewer sections or fields, or resubscribe with from_sequence", s.queue_.size(), snapshot->sequence);
        s.queue_.clear();
        ++dropped_total_;
        log_info("{}", s.drop_reason_);
    } else {
        s.queue_.push_back(snapshot);
    }
    s.ready_.notify_one();
}

void Fanout::publish(const SnapshotPtr& snapshot) {
    std::lock_guard lock(mutex_);
    // A reader that re-opened the segment catches up on the ring again: frames already sent are not resent.
    if (!history_.empty() && history_.back()->generation == snapshot->generation &&
        history_.back()->sequence >= snapshot->sequence) {
        return;
    }
    // The history holds what the segment's ring holds, so a subscriber can start where a local reader could.
    const size_t keep = std::clamp<size_t>(snapshot->segment->header.slot_count, 1, 4096);
    history_.push_back(snapshot);
    while (history_.size() > keep) history_.pop_front();
    for (const auto& subscriber : subscribers_) queue_or_drop(*subscriber, snapshot);
}

// A dropped subscriber's client may keep its handler blocked in a write (it does not read); the grace
// lets a client that is merely busy still read its RESOURCE_EXHAUSTED status.
void Fanout::tick() {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    for (const auto& s : subscribers_) {
        std::lock_guard sub_lock(s->mutex_);
        if (s->dropped_ && !s->cancelled_ && now - s->dropped_at_ > std::chrono::seconds(limits_.drop_grace_s)) {
            s->cancelled_ = true;
            s->context_->TryCancel();
        }
    }
}

Fanout::Start Fanout::subscribe(uint64_t from_sequence, grpc::ServerContext* context) {
    std::lock_guard lock(mutex_);
    Start start;
    if (stopped_) return {nullptr, grpc::StatusCode::UNAVAILABLE, "kepler-feed is shutting down", 0};
    if (subscribers_.size() >= limits_.max_subscribers) {
        return {nullptr, grpc::StatusCode::RESOURCE_EXHAUSTED,
                fmt::format("kepler-feed serves at most {} subscribers (--max-subscribers)", limits_.max_subscribers), 0};
    }
    std::vector<SnapshotPtr> backlog;
    if (history_.empty() && from_sequence != 0) {
        return {nullptr, grpc::StatusCode::UNAVAILABLE,
                "kepler-feed holds no frames yet (its segment is not there or has published nothing); retry", 0};
    }
    if (!history_.empty()) {
        const uint64_t newest = history_.back()->sequence, oldest = history_.front()->sequence;
        if (from_sequence > newest + 1) {
            return {nullptr, grpc::StatusCode::INVALID_ARGUMENT,
                    fmt::format("from_sequence {} is beyond the newest frame {}; use 0 for the newest", from_sequence, newest), 0};
        }
        if (from_sequence == 0) backlog.push_back(history_.back());
        for (const SnapshotPtr& s : history_)
            if (from_sequence != 0 && s->sequence >= from_sequence) backlog.push_back(s);
        if (from_sequence != 0 && from_sequence < oldest) start.gap = oldest - from_sequence;
    }
    auto subscriber = std::make_shared<Subscriber>();
    subscriber->queue_.assign(backlog.begin(), backlog.end());
    subscriber->limit_ = limits_.queue_frames + backlog.size();  // the backlog is bounded by the history
    subscriber->context_ = context;
    subscribers_.push_back(subscriber);
    start.subscriber = std::move(subscriber);
    return start;
}

void Fanout::unsubscribe(const std::shared_ptr<Subscriber>& subscriber) {
    std::lock_guard lock(mutex_);
    std::erase(subscribers_, subscriber);
    std::lock_guard sub_lock(subscriber->mutex_);
    subscriber->context_ = nullptr;
}

void Fanout::stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    for (const auto& s : subscribers_) {
        std::lock_guard sub_lock(s->mutex_);
        s->stopped_ = true;
        s->ready_.notify_one();
    }
}

uint32_t Fanout::subscribers() {
    std::lock_guard lock(mutex_);
    return static_cast<uint32_t>(subscribers_.size());
}

uint64_t Fanout::dropped_total() {
    std::lock_guard lock(mutex_);
    return dropped_total_;
}

uint64_t Fanout::oldest_sequence() {
    std::lock_guard lock(mutex_);
    return history_.empty() ? 0 : history_.front()->sequence;
}

uint32_t Fanout::history_frames() {
    std::lock_guard lock(mutex_);
    return static_cast<uint32_t>(history_.size());
}

}  // namespace kepler::feed
