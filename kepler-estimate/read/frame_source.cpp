#include "read/frame_source.hpp"

#include <fmt/format.h>

#include <thread>

namespace kepler_estimate {

using std::chrono::milliseconds;

FrameSource FrameSource::live(std::string name) { return FrameSource(std::move(name), false); }

FrameSource FrameSource::replay(const std::string& path) {
    FrameSource source(path, true);
    source.reader_.emplace(keplershm::Reader::open_recording(path));
    return source;
}

uint64_t FrameSource::reattaches() { return reader_ ? reader_->info().reattach_count : 0; }

uint64_t FrameSource::recording_frames() { return recording_ && reader_ ? reader_->latest() : 0; }

FrameSource::Result FrameSource::read_next(keplershm::FrameView& view, milliseconds timeout) {
    const keplershm::Status status = reader_->next(timeout, view);
    if (!recording_) {
        const uint64_t reattaches = reader_->info().reattach_count;
        if (reattaches != reattaches_seen_) {
            fmt::print(stderr, "kepler-estimate: segment '{}' has a new generation (collector restarted or grew); "
                               "following it\n", name_);
            reattaches_seen_ = reattaches;
        }
    }
    switch (status) {
        case keplershm::Status::ok: return Result::frame;
        case keplershm::Status::end_of_recording: return Result::end;
        case keplershm::Status::truncated:
            fmt::print(stderr, "kepler-estimate: recording '{}' ends in the middle of a record: the frames before "
                               "the cut were estimated\n", name_);
            truncated_ = true;
            return Result::end;
        default: return Result::idle;  // timeout, or the writer is gone and no successor yet
    }
}

FrameSource::Result FrameSource::next(keplershm::FrameView& view, milliseconds timeout) {
    if (!reader_) {
        try {
            reader_.emplace(keplershm::Reader::open(name_));
            fmt::print(stderr, "kepler-estimate: reading segment '{}'\n", name_);
            said_waiting_ = false;
        } catch (const keplershm::Error& e) {
            if (!said_waiting_) {
                fmt::print(stderr, "kepler-estimate: waiting for segment '{}' ({})\n", name_, e.what());
                said_waiting_ = true;
            }
            std::this_thread::sleep_for(std::min(timeout, milliseconds(50)));  // shm_open is cheap: catch frame 1
            return Result::idle;
        }
    }
    for (;;) {
        try {
            return read_next(view, timeout);
        } catch (const keplershm::Error& e) {
            ++errors_;
            constexpr uint64_t kLoggedErrors = 10;  // a hostile segment must not flood the log at 1 Hz
            if (errors_ <= kLoggedErrors) {
                fmt::print(stderr, "kepler-estimate: {}: {}{}\n", recording_ ? "recording" : "segment", e.what(),
                           errors_ == kLoggedErrors ? " (further rejected frames are only counted)" : "");
            }
            // The reader stepped over a corrupt frame: a recording reads on at once, a live segment next call.
            if (e.code() == KEPLERSHM_E_CORRUPT) {
                if (recording_) continue;
                return Result::idle;
            }
            if (recording_) return Result::end;  // the file itself is unreadable: stop with what was read
            reader_.reset();                     // re-open: the next writer generation may be fine
            reattaches_seen_ = 0;
            return Result::idle;
        }
    }
}

}  // namespace kepler_estimate
