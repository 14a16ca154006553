#include "keplershm/follower.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <thread>

namespace keplershm {

using std::chrono::milliseconds;

namespace {

/// A hostile segment must not flood its reader's log: rejections past this many are only counted.
constexpr uint64_t kToldRejections = 10;

keplershm_segment_info no_segment() {
    keplershm_segment_info info{};
    info.sz = sizeof info;
    return info;
}

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

Follower::Follower(std::string name, ReaderOptions options, EventSink on_event)
    : name_(std::move(name)), options_(std::move(options)), on_event_(std::move(on_event)), info_(no_segment()) {}

void Follower::tell(FollowerEvent::Kind kind, bool warning, std::string message) {
    if (on_event_) on_event_(FollowerEvent{kind, warning, std::move(message)});
}

bool Follower::open() {
    try {
        reader_.emplace(Reader::open(name_, options_));
    } catch (const Error& e) {
        if (!said_waiting_) tell(FollowerEvent::Kind::waiting, false, fmt::format("waiting for segment '{}' ({})", name_, e.what()));
        said_waiting_ = true;
        return false;
    }
    said_waiting_ = false;
    reattaches_seen_ = 0;
    writer_state_ = WriterState::live;
    tell(FollowerEvent::Kind::reading, false, fmt::format("reading segment '{}'", name_));
    return true;
}

void Follower::report_writer() {
    info_ = reader_->info();
    if (info_.reattach_count != reattaches_seen_) {
        reattaches_seen_ = info_.reattach_count;
        writer_state_ = WriterState::live;
        tell(FollowerEvent::Kind::new_generation, false,
             fmt::format("segment '{}' has a new generation {:#x} (its writer restarted or grew); following it", name_,
                         info_.header != nullptr ? info_.header->generation : 0));
    }
    const WriterState now = info_.state == KEPLERSHM_STATE_RETIRED ? WriterState::retired
                            : info_.writer_stale != 0            ? WriterState::stale
                                                                 : WriterState::live;
    if (now == writer_state_ || info_.state == KEPLERSHM_STATE_REPLACED) return;  // replaced: followed next call
    writer_state_ = now;
    switch (now) {
        case WriterState::retired:
            return tell(FollowerEvent::Kind::retired, false,
                        fmt::format("the writer of segment '{}' stopped cleanly (retired); waiting for a successor", name_));
        case WriterState::stale:
            return tell(FollowerEvent::Kind::stale, true,
                        fmt::format("writer of segment '{}' stale since {} (its heartbeat stood still for {:.1f} s), "
                                    "waiting for a successor",
                                    name_, stale_since(info_), static_cast<double>(info_.heartbeat_age_ns) / 1e9));
        case WriterState::live:
            return tell(FollowerEvent::Kind::beats_again, false,
                        fmt::format("writer of segment '{}' beats again; reading on", name_));
    }
}

void Follower::reject(const Error& error) {
    ++rejected_;
    if (rejected_ > kToldRejections) return;
    const bool corrupt = error.code() == KEPLERSHM_E_CORRUPT;
    const std::string what = error.what();
    tell(corrupt ? FollowerEvent::Kind::rejected_frame : FollowerEvent::Kind::reopening, true,
         fmt::format("{}{}{}{}", what.find(name_) == std::string::npos ? fmt::format("segment '{}': ", name_) : "", what,
                     corrupt ? "" : "; re-opening it",
                     rejected_ == kToldRejections ? " (further rejected frames are only counted)" : ""));
}

Follower::Result Follower::next(FrameView& view, milliseconds timeout) {
    if (!reader_ && !open()) {
        std::this_thread::sleep_for(std::min(timeout, milliseconds(50)));  // shm_open is cheap: catch frame 1
        return Result::idle;
    }
    try {
        const Status status = reader_->next(timeout, view);
        report_writer();
        return status == Status::ok ? Result::frame : Result::idle;  // timeout, or no successor yet
    } catch (const Error& e) {
        reject(e);
        // The reader stepped over a corrupt frame: the next call reads on. Anything else: reopen the name,
        // whose next writer generation may be fine.
        if (e.code() != KEPLERSHM_E_CORRUPT) {
            reader_.reset();
            info_ = no_segment();
        }
        return Result::idle;
    }
}

}  // namespace keplershm
