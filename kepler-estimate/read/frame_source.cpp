#include "read/frame_source.hpp"

#include "support/log/log.hpp"

namespace kepler::estimate {

using std::chrono::milliseconds;

FrameSource FrameSource::live(std::string name, keplershm::ReaderOptions reader_options) {
    FrameSource source;
    source.follower_.emplace(std::move(name), std::move(reader_options), [](const keplershm::FollowerEvent& event) {
        log(event.warning ? LogLevel::warn : LogLevel::info, "{}", event.message);
    });
    return source;
}

FrameSource FrameSource::replay(const std::string& path) {
    FrameSource source;
    source.path_ = path;
    source.recording_.emplace(keplershm::Reader::open_recording(path));
    return source;
}

FrameSource::Result FrameSource::next(keplershm::FrameView& view, milliseconds timeout) {
    if (recording_) return next_recorded(view);
    return follower_->next(view, timeout) == keplershm::Follower::Result::frame ? Result::frame : Result::idle;
}

// A recording is read to its end at once: a corrupt frame is stepped over, an unreadable file ends the
// replay with what was read.
FrameSource::Result FrameSource::next_recorded(keplershm::FrameView& view) {
    for (;;) {
        try {
            switch (recording_->next(milliseconds(0), view)) {
                case keplershm::Status::ok: return Result::frame;
                case keplershm::Status::truncated:
                    log_warn("recording '{}' ends in the middle of a record: the frames before the cut were "
                             "estimated", path_);
                    truncated_ = true;
                    return Result::end;
                default: return Result::end;
            }
        } catch (const keplershm::Error& e) {
            ++errors_;
            constexpr uint64_t kLoggedErrors = 10;  // a hostile recording must not flood the log
            if (errors_ <= kLoggedErrors) {
                log_warn("recording: {}{}", e.what(),
                         errors_ == kLoggedErrors ? " (further rejected frames are only counted)" : "");
            }
            if (e.code() != KEPLERSHM_E_CORRUPT) return Result::end;
        }
    }
}

}  // namespace kepler::estimate
