#include "external/estimates_feed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

namespace kepler::estimate {

using std::chrono::milliseconds;

namespace {

constexpr size_t kInboxCapacity = 256;          // arrivals kept until the pipeline takes them
constexpr uint32_t kMaxArrivalsPerSecond = 1000;  // a producer publishing faster is flooding us
constexpr milliseconds kPollSlice{250};          // reader wait slice: bounds shutdown latency
constexpr milliseconds kOpenRetry{250};          // look for a missing segment this often
constexpr milliseconds kErrorBackoff{1000};      // after a broken or refused segment

bool has_answer_for(const std::deque<Arrival>& inbox, FrameId frame) {
    return std::any_of(inbox.begin(), inbox.end(), [&](const Arrival& a) {
        return std::visit([&](const auto& answer) { return answer.frame == frame; }, a.answer);
    });
}

std::string kind_refusal(const std::string& name, uint32_t kind) {
    return fmt::format("segment {} is of kind {} ({}), not an estimates segment (kind {}): refused", name, kind,
                       kind == KEPLERSHM_SEGMENT_FRAMES ? "collector frames" : "unknown",
                       static_cast<int>(KEPLERSHM_SEGMENT_ESTIMATES));
}

/// A live estimates segment read on its own thread. Thread-safe: the public methods lock mutex_;
/// the reader itself is touched by the reader thread only.
class LiveFeed final : public AnswerSource {
public:
    LiveFeed(std::string name, keplershm::ReaderOptions reader_options)
        : name_(std::move(name)), reader_options_(std::move(reader_options)) {
        status_.state = fmt::format("waiting for estimates segment {}", name_);
        thread_ = std::thread([this] { run(); });
    }
    ~LiveFeed() override {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        changed_.notify_all();
        thread_.join();
    }

    std::vector<Arrival> take(FrameId) override {
        std::lock_guard lock(mutex_);
        std::vector<Arrival> out(std::make_move_iterator(inbox_.begin()), std::make_move_iterator(inbox_.end()));
        inbox_.clear();
        return out;
    }

    bool wait_for(FrameId frame, SteadyClock::time_point deadline) override {
        std::unique_lock lock(mutex_);
        return changed_.wait_until(lock, deadline, [&] { return stop_ || has_answer_for(inbox_, frame); }) && !stop_;
    }

    FeedStatus status() const override {
        std::lock_guard lock(mutex_);
        return status_;
    }
    bool is_recording() const noexcept override { return false; }

private:
    void run();
    /// Sleeps unless asked to stop; false when stopping.
    bool pause(milliseconds time) {
        std::unique_lock lock(mutex_);
        return !changed_.wait_for(lock, time, [&] { return stop_; });
    }
    bool stopping() {
        std::lock_guard lock(mutex_);
        return stop_;
    }
    void detach(std::string why) {
        std::lock_guard lock(mutex_);
        status_.attached = false;
        status_.state = std::move(why);
    }
    void attach(const keplershm_segment_info& info) {
        std::lock_guard lock(mutex_);
        status_.attached = true;
        status_.state.clear();
        status_.producer = std::string(keplershm::get_text(info.node_name));
        status_.version = std::string(keplershm::get_text(info.cpu_model));
    }
    void deliver(Arrival arrival) {
        {
            std::lock_guard lock(mutex_);
            status_.attached = true;  // a frame came: the producer is back if it had gone
            status_.state.clear();
            if (inbox_.size() >= kInboxCapacity) {
                inbox_.pop_front();  // the pipeline is not taking (no collector frames): keep the newest
                ++status_.arrivals_dropped;
            }
            inbox_.push_back(std::move(arrival));
        }
        changed_.notify_all();
    }
    void count_dropped(uint64_t frames) {
        std::lock_guard lock(mutex_);
        status_.arrivals_dropped += frames;
    }

    const std::string name_;
    const keplershm::ReaderOptions reader_options_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;  // an arrival, or stop_
    std::deque<Arrival> inbox_;
    FeedStatus status_;
    bool stop_ = false;
    std::thread thread_;
};

void LiveFeed::run() {
    std::optional<keplershm::Reader> reader;
    uint64_t checked_generation = 0;
    auto second_start = SteadyClock::now();
    uint32_t this_second = 0;
    while (!stopping()) {
        if (!reader) {
            try {
                reader.emplace(keplershm::Reader::open(name_, reader_options_));
                checked_generation = 0;
            } catch (const keplershm::Error& e) {
                detach(fmt::format("waiting for estimates segment {} ({})", name_, e.what()));
                pause(kOpenRetry);
                continue;
            }
        }
        try {
            const keplershm_segment_info info = reader->info();
            if (info.generation != checked_generation) {
                if (info.segment_kind != KEPLERSHM_SEGMENT_ESTIMATES) {
                    detach(kind_refusal(name_, info.segment_kind));
                    reader.reset();  // a new writer may put an estimates segment under the name
                    pause(kErrorBackoff);
                    continue;
                }
                checked_generation = info.generation;
                attach(info);
            }
            keplershm::FrameView view;
            const keplershm::Status status = reader->next(kPollSlice, view);
            if (status == keplershm::Status::writer_gone) {
                detach(fmt::format("the producer of estimates segment {} is gone (retired, or its heartbeat stopped); "
                                   "waiting for a new one", name_));
            }
            if (status != keplershm::Status::ok) continue;
            deliver(Arrival{parse_answer(view), SteadyClock::now()});
            if (SteadyClock::now() - second_start > std::chrono::seconds(1)) {
                second_start = SteadyClock::now();
                this_second = 0;
            }
            if (++this_second >= kMaxArrivalsPerSecond) {
                // Flooded: rest for the rest of the second. The frames published meanwhile are lapped
                // and skipped by the reader (counted as missed below), never queued.
                pause(std::chrono::duration_cast<milliseconds>(second_start + std::chrono::seconds(1) - SteadyClock::now()));
            }
            if (view.missed() > 0) count_dropped(view.missed());
        } catch (const keplershm::Error& e) {
            detach(fmt::format("estimates segment {}: {}; re-opening", name_, e.what()));
            reader.reset();
            pause(kErrorBackoff);
        }
    }
}

/// A recording of an estimates segment, read on the caller's thread as the replay reaches each
/// collector frame. Not thread-safe.
class RecordedFeed final : public AnswerSource {
public:
    explicit RecordedFeed(std::string path) : path_(std::move(path)) {
        try {
            reader_.emplace(keplershm::Reader::open_recording(path_));
            const keplershm_segment_info info = reader_->info();
            if (info.segment_kind != KEPLERSHM_SEGMENT_ESTIMATES) {
                status_.state = kind_refusal(path_, info.segment_kind);
                reader_.reset();
                return;
            }
            status_.attached = true;
            status_.producer = std::string(keplershm::get_text(info.node_name));
            status_.version = std::string(keplershm::get_text(info.cpu_model));
        } catch (const keplershm::Error& e) {
            status_.state = fmt::format("cannot read estimates recording {}: {}", path_, e.what());
        }
    }

    std::vector<Arrival> take(FrameId current) override {
        std::vector<Arrival> out;
        // Reads up to the answer for `current` (or past it, in the same generation); a bounded number
        // of frames per call, so a recording of another run does not end up in memory all at once.
        constexpr size_t kMaxPerCall = 64;
        while (reader_ && out.size() < kMaxPerCall &&
               !(last_.generation == current.generation && last_.sequence >= current.sequence)) {
            keplershm::FrameView view;
            try {
                const keplershm::Status status = reader_->next(milliseconds(0), view);
                if (status != keplershm::Status::ok) {
                    status_.state = status == keplershm::Status::truncated ? "estimates recording ends inside a record"
                                                                           : "";
                    reader_.reset();  // the end: frames after it get no answer
                    break;
                }
            } catch (const keplershm::Error& e) {
                status_.state = fmt::format("estimates recording {}: {}", path_, e.what());
                status_.attached = false;
                reader_.reset();
                break;
            }
            out.push_back(Arrival{parse_answer(view), SteadyClock::now()});
            std::visit([&](const auto& answer) { last_ = answer.frame; }, out.back().answer);
        }
        return out;
    }
    bool wait_for(FrameId, SteadyClock::time_point) override { return false; }
    FeedStatus status() const override { return status_; }
    bool is_recording() const noexcept override { return true; }

private:
    std::string path_;
    std::optional<keplershm::Reader> reader_;
    FeedStatus status_;
    FrameId last_;
};

}  // namespace

std::unique_ptr<AnswerSource> make_answer_source(const std::string& source, const keplershm::ReaderOptions& reader_options) {
    std::error_code ec;
    if (source.find('/') != std::string::npos || std::filesystem::is_regular_file(source, ec)) {
        return std::make_unique<RecordedFeed>(source);
    }
    return std::make_unique<LiveFeed>(source, reader_options);
}

}  // namespace kepler::estimate
