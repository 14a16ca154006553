// Where frames come from: a live segment (keplershm::Follower: waited for until it appears, followed
// across collector restarts, what it does logged) or a recording file (read as fast as possible).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "keplershm/follower.hpp"
#include "keplershm/keplershm.hpp"

namespace kepler::estimate {

/// Owns one keplershm::Follower or one recording's keplershm::Reader. Not thread-safe: one pipeline
/// thread reads from it.
class FrameSource {
public:
    enum class Result { frame, idle, end };

    /// A live segment by name; the segment may not exist yet.
    static FrameSource live(std::string name, keplershm::ReaderOptions reader_options = {});
    /// A recording; throws keplershm::Error when it cannot be opened.
    static FrameSource replay(const std::string& path);

    /// The next frame (a private copy, valid until the next call), or idle after `timeout` with nothing
    /// new, or end when a recording is over. Frames lost since the previous call are in view.missed().
    /// Broken frames are logged, counted in errors() and skipped.
    Result next(keplershm::FrameView& view, std::chrono::milliseconds timeout);

    [[nodiscard]] bool is_recording() const noexcept { return recording_.has_value(); }
    [[nodiscard]] uint64_t errors() const noexcept { return follower_ ? follower_->rejected_frames() : errors_; }
    /// A recording that ends in the middle of a record (its whole frames were delivered).
    [[nodiscard]] bool truncated() const noexcept { return truncated_; }
    [[nodiscard]] uint64_t reattaches() const noexcept { return follower_ ? follower_->reattaches() : 0; }
    /// Frames in a recording (0 for live sources).
    [[nodiscard]] uint64_t recording_frames() { return recording_ ? recording_->latest() : 0; }

private:
    FrameSource() = default;
    Result next_recorded(keplershm::FrameView& view);

    std::string path_;
    std::optional<keplershm::Follower> follower_;
    std::optional<keplershm::Reader> recording_;
    uint64_t errors_ = 0;
    bool truncated_ = false;
};

}  // namespace kepler::estimate
