// Where frames come from: a live segment (waited for until it appears, followed across collector
// restarts) or a recording file (read as fast as possible).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "keplershm/keplershm.hpp"

namespace kepler::estimate {

/// Owns one keplershm::Reader. Not thread-safe: one pipeline thread reads from it.
class FrameSource {
public:
    enum class Result { frame, idle, end };

    /// A live segment by name; the segment may not exist yet.
    static FrameSource live(std::string name, keplershm::ReaderOptions reader_options = {});
    /// A recording; throws keplershm::Error when it cannot be opened.
    static FrameSource replay(const std::string& path);

    /// The next frame (a private copy, valid until the next call), or idle after `timeout` with
    /// nothing new, or end when a recording is over. Frames lost since the previous call are in
    /// view.missed(). Broken frames are logged, counted in errors() and skipped.
    Result next(keplershm::FrameView& view, std::chrono::milliseconds timeout);

    [[nodiscard]] bool is_recording() const noexcept { return recording_; }
    [[nodiscard]] uint64_t errors() const noexcept { return errors_; }
    /// A recording that ends in the middle of a record (its whole frames were delivered).
    [[nodiscard]] bool truncated() const noexcept { return truncated_; }
    [[nodiscard]] uint64_t reattaches();
    /// Frames in a recording (0 for live sources).
    [[nodiscard]] uint64_t recording_frames();

private:
    /// What the live writer is doing, as far as this reader can tell (PROTOCOL.md §1.3).
    enum class WriterState { live, retired, stale };

    FrameSource(std::string name, bool recording, keplershm::ReaderOptions reader_options = {})
        : name_(std::move(name)), recording_(recording), reader_options_(std::move(reader_options)) {}
    Result read_next(keplershm::FrameView& view, std::chrono::milliseconds timeout);
    /// Logs what the reader follows or waits for, once per change: a new generation, a writer that
    /// retired or went stale (and since when), one that beats again.
    void report_writer(const keplershm_segment_info& info);

    std::string name_;
    bool recording_ = false;
    keplershm::ReaderOptions reader_options_;
    std::optional<keplershm::Reader> reader_;
    bool said_waiting_ = false;
    uint64_t errors_ = 0;
    bool truncated_ = false;
    uint64_t reattaches_seen_ = 0;
    WriterState writer_state_ = WriterState::live;
};

}  // namespace kepler::estimate
