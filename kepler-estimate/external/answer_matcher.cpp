#include "external/answer_matcher.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "keplershm/estimates.hpp"

namespace kepler::estimate {

void AnswerMatcher::reject(FrameId frame, std::string reason) {
    ++counts_.rejected;
    if (rejections_.size() < 64) rejections_.emplace_back(frame, reason);
    last_rejection_ = std::move(reason);
}

std::vector<std::pair<FrameId, std::string>> AnswerMatcher::take_rejections() {
    std::vector<std::pair<FrameId, std::string>> out;
    out.swap(rejections_);
    return out;
}

AnswerMatcher::Pending* AnswerMatcher::find(FrameId frame) {
    for (Pending& p : window_) {
        if (p.frame == frame) return &p;
    }
    return nullptr;
}

void AnswerMatcher::begin_frame(FrameId frame, SteadyClock::time_point read_at, double interval_s) {
    ++frames_begun_;
    current_.reset();
    current_taken_ = false;
    window_.push_back(Pending{frame, read_at, interval_s});
    while (window_.size() > std::max<size_t>(options_.window_frames, 1)) {
        if (!window_.front().answered) ++counts_.missing;
        window_.pop_front();
    }
    for (auto it = early_.begin(); it != early_.end();) {
        if (it->frame == frame) {
            Arrival arrival = std::move(it->arrival);
            it = early_.erase(it);
            add(std::move(arrival));  // now matches the current frame
        } else if (frames_begun_ - it->seen_at_frame > options_.window_frames) {
            reject(it->frame, "answer for a frame this estimator never read");
            it = early_.erase(it);
        } else {
            ++it;
        }
    }
}

void AnswerMatcher::match(Pending& pending, EstimatesAnswer answer, SteadyClock::time_point at) {
    for (const auto& [kind, joules] : answer.zones) {
        const double watts = pending.interval_s > 0 ? joules / pending.interval_s : 0;
        if (watts > keplershm::kMaxEstimateWatts) {
            reject(pending.frame, fmt::format("{} J in zone {} over the {} s interval is {} W, above {} W", joules,
                                              zone_name(kind), pending.interval_s, watts, keplershm::kMaxEstimateWatts));
            return;  // the frame stays unanswered
        }
    }
    const double lag = options_.timed ? std::max(0.0, std::chrono::duration<double>(at - pending.read_at).count()) : 0.0;
    pending.answered = true;
    pending.late = options_.timed && lag > pending.interval_s;
    ++counts_.answers;
    if (pending.late) ++counts_.late;
    last_lag_s_ = lag;
    if (&pending == &window_.back() && !current_taken_) {
        current_ = std::move(answer);
        return;
    }
    matched_.push_back(MatchedAnswer{pending.frame, std::move(answer), pending.interval_s, lag, pending.late});
}

void AnswerMatcher::add(Arrival arrival) {
    if (auto* rejected = std::get_if<RejectedAnswer>(&arrival.answer)) {
        reject(rejected->frame, std::move(rejected->reason));
        return;
    }
    auto& answer = std::get<EstimatesAnswer>(arrival.answer);
    if (Pending* pending = find(answer.frame)) {
        if (pending->answered) {
            reject(answer.frame, "second answer for a frame: ignored");
            return;
        }
        match(*pending, std::move(answer), arrival.at);
        return;
    }
    const bool past = !window_.empty() && answer.frame.generation == window_.back().frame.generation &&
                      answer.frame.sequence <= window_.back().frame.sequence;
    if (past) {
        reject(answer.frame, fmt::format("answer for a frame this estimator did not read or no longer remembers (it "
                                         "keeps the last {})", options_.window_frames));
        return;
    }
    // A frame not read yet (the estimator is behind) or of a generation not seen yet: keep it a while.
    if (early_.size() >= options_.max_early) {
        reject(early_.front().frame, "answer for a frame this estimator never read");
        early_.pop_front();
    }
    const FrameId frame = answer.frame;
    early_.push_back(Early{std::move(arrival), frame, frames_begun_});
}

std::optional<EstimatesAnswer> AnswerMatcher::take_current() {
    if (!current_) return std::nullopt;
    ++counts_.used;
    current_taken_ = true;
    std::optional<EstimatesAnswer> out = std::move(current_);
    current_.reset();
    return out;
}

bool AnswerMatcher::current_answered() const noexcept { return current_.has_value(); }

std::vector<MatchedAnswer> AnswerMatcher::take_matched() {
    std::vector<MatchedAnswer> out;
    out.swap(matched_);
    return out;
}

bool AnswerMatcher::keeping_up() const noexcept {
    if (window_.size() < 2) return true;
    const Pending& previous = window_[window_.size() - 2];
    return previous.answered && !previous.late;
}

}  // namespace kepler::estimate
