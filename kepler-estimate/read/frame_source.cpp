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
    try {
        switch (reader_->next(timeout, view)) {
            case keplershm::Status::ok: return Result::frame;
            case keplershm::Status::end_of_recording: return Result::end;
            case keplershm::Status::truncated:
                fmt::print(stderr, "kepler-estimate: recording '{}' ends in the middle of a record\n", name_);
                return Result::end;
            default: return Result::idle;  // timeout, or the writer is gone and no successor yet
        }
    } catch (const keplershm::Error& e) {
        ++errors_;
        fmt::print(stderr, "kepler-estimate: {}: {}\n", recording_ ? "recording" : "segment", e.what());
        if (recording_) return Result::end;  // a file does not heal: stop with what was read
        reader_.reset();                     // re-open: the next writer generation may be fine
        return Result::idle;
    }
}

}  // namespace kepler_estimate
