#include "read/frame_source.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>
#include <thread>

#include "support/log/log.hpp"

namespace kepler::estimate {

using std::chrono::milliseconds;

FrameSource FrameSource::live(std::string name, keplershm::ReaderOptions reader_options) {
    return FrameSource(std::move(name), false, std::move(reader_options));
}

FrameSource FrameSource::replay(const std::string& path) {
    FrameSource source(path, true);
    source.reader_.emplace(keplershm::Reader::open_recording(path));
    return source;
}

namespace {

/// When a stale writer last showed life, in wall time: its own last beat (ABI 1.1), or for a writer of
/// 1.0, which keeps no wall time, the moment this reader last saw its heartbeat advance.
std::string stale_since(const keplershm_segment_info& info) {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    const uint64_t now_ns = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(now.tv_nsec);
    const uint64_t since_ns = info.heartbeat_realtime_ns != 0 ? info.heartbeat_realtime_ns : now_ns - info.heartbeat_age_ns;
    return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(static_cast<std::time_t>(since_ns / 1'000'000'000ull)));
}

}  // namespace

void FrameSource::report_writer(const keplershm_segment_info& info) {
    if (info.reattach_count != reattaches_seen_) {
        log_info("segment '{}' has a new generation (collector restarted or grew); "
                 "following it", name_);
        reattaches_seen_ = info.reattach_count;
        writer_state_ = WriterState::live;
    }
    const WriterState now = info.state == KEPLERSHM_STATE_RETIRED ? WriterState::retired
                            : info.writer_stale != 0           ? WriterState::stale
                                                               : WriterState::live;
    if (now == writer_state_ || info.state == KEPLERSHM_STATE_REPLACED) return;  // replaced: followed next call
    writer_state_ = now;
    switch (now) {
        case WriterState::retired:
            log_info("the collector of segment '{}' stopped cleanly (retired); waiting for "
                     "a successor", name_);
            break;
        case WriterState::stale:
            log_warn("writer of segment '{}' stale since {} (its heartbeat stood still for "
                     "{:.1f} s), waiting for a successor", name_, stale_since(info),
                     static_cast<double>(info.heartbeat_age_ns) / 1e9);
            break;
        case WriterState::live:
            log_info("writer of segment '{}' beats again; reading on", name_);
            break;
    }
}

uint64_t FrameSource::reattaches() { return reader_ ? reader_->info().reattach_count : 0; }

uint64_t FrameSource::recording_frames() { return recording_ && reader_ ? reader_->latest() : 0; }

FrameSource::Result FrameSource::read_next(keplershm::FrameView& view, milliseconds timeout) {
    const keplershm::Status status = reader_->next(timeout, view);
    if (!recording_) report_writer(reader_->info());
    switch (status) {
        case keplershm::Status::ok: return Result::frame;
        case keplershm::Status::end_of_recording: return Result::end;
        case keplershm::Status::truncated:
            log_warn("recording '{}' ends in the middle of a record: the frames before "
                     "the cut were estimated", name_);
            truncated_ = true;
            return Result::end;
        default: return Result::idle;  // timeout, or the writer is gone and no successor yet
    }
}

FrameSource::Result FrameSource::next(keplershm::FrameView& view, milliseconds timeout) {
    if (!reader_) {
        try {
            reader_.emplace(keplershm::Reader::open(name_, reader_options_));
            log_info("reading segment '{}'", name_);
            said_waiting_ = false;
        } catch (const keplershm::Error& e) {
            if (!said_waiting_) {
                log_info("waiting for segment '{}' ({})", name_, e.what());
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
                log_warn("{}: {}{}", recording_ ? "recording" : "segment", e.what(),
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
            writer_state_ = WriterState::live;
            return Result::idle;
        }
    }
}

}  // namespace kepler::estimate
