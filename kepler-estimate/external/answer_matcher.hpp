// Matching an external model's answers to the collector frames the estimator read, by generation and
// sequence, and counting how each fared: used (there when the frame was estimated), on time or late
// (arrived within one collector interval of the frame being read, or after), missing (no answer while
// the frame was remembered), rejected (invalid, for a frame never read or forgotten, or a duplicate).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "external/estimates_feed.hpp"
#include "model/node_model.hpp"

namespace kepler::estimate {

/// An answer matched to a frame read earlier (not the one being estimated). Plain value.
struct MatchedAnswer {
    FrameId frame;
    EstimatesAnswer answer;
    double interval_s = 0;  // of the answered collector frame
    double lag_s = 0;       // from reading the frame to the answer's arrival
    bool late = false;
};

struct MatcherOptions {
    size_t window_frames = 16;  // frames remembered for late answers; older ones without one are missing
    size_t max_early = 64;      // answers kept for frames not read yet (the estimator is behind)
    bool timed = true;          // false for recordings: arrival times mean nothing, nothing is late
};

/// Not thread-safe: the pipeline thread owns it.
class AnswerMatcher {
public:
    explicit AnswerMatcher(MatcherOptions options = {}) : options_(options) {}

    /// Frame `frame` is being estimated now (`read_at`): it becomes the current frame and joins the
    /// window; the frame leaving the window is counted missing if it got no answer.
    void begin_frame(FrameId frame, SteadyClock::time_point read_at, double interval_s);
    /// Files one arrival: the current frame's answer, a matched answer for an earlier frame, an early
    /// answer kept for later, or a rejection.
    void add(Arrival arrival);

    /// The current frame's answer, if it has arrived (counted as used); at most once per frame.
    [[nodiscard]] std::optional<EstimatesAnswer> take_current();
    [[nodiscard]] bool current_answered() const noexcept;
    /// Answers matched to earlier frames since the last call.
    [[nodiscard]] std::vector<MatchedAnswer> take_matched();
    /// True when the frame before the current one was answered on time (or there is none): the
    /// producer keeps up, so waiting a little for the current answer is worth it.
    [[nodiscard]] bool keeping_up() const noexcept;

    [[nodiscard]] const AnswerCounts& counts() const noexcept { return counts_; }
    /// Why the latest rejected answer was rejected ("" before any): stable text without frame numbers.
    [[nodiscard]] const std::string& last_rejection() const noexcept { return last_rejection_; }
    /// Rejections since the last call (frame claimed, reason), at most the first 64 of them.
    [[nodiscard]] std::vector<std::pair<FrameId, std::string>> take_rejections();
    /// Seconds from reading a frame to its answer, for the latest matched answer (nullopt before any).
    [[nodiscard]] std::optional<double> last_lag_s() const noexcept { return last_lag_s_; }

private:
    struct Pending {
        FrameId frame;
        SteadyClock::time_point read_at;
        double interval_s = 0;
        bool answered = false;
        bool late = false;
    };
    struct Early {
        Arrival arrival;
        FrameId frame;
        uint64_t seen_at_frame = 0;  // frames_begun_ when it arrived
    };

    void reject(FrameId frame, std::string reason);
    void match(Pending& pending, EstimatesAnswer answer, SteadyClock::time_point at);
    Pending* find(FrameId frame);

    MatcherOptions options_;
    std::deque<Pending> window_;  // oldest first; back() is the current frame
    std::deque<Early> early_;
    std::optional<EstimatesAnswer> current_;
    bool current_taken_ = false;
    std::vector<MatchedAnswer> matched_;
    AnswerCounts counts_;
    std::string last_rejection_;
    std::vector<std::pair<FrameId, std::string>> rejections_;  // since take_rejections()
    std::optional<double> last_lag_s_;
    uint64_t frames_begun_ = 0;
};

}  // namespace kepler::estimate
