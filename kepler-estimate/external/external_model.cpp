#include "external/external_model.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kepler::estimate {

ExternalModel::ExternalModel(std::string name, std::string source, ExternalOptions options)
    : name_(std::move(name)), source_name_(std::move(source)), options_(options), source_(make_answer_source(source_name_, options_.reader)) {
    MatcherOptions matcher = options_.matcher;
    matcher.timed = !source_->is_recording();
    matcher_ = AnswerMatcher(matcher);
}

NodeEnergy ExternalModel::to_energy(const EstimatesAnswer& answer) const {
    NodeEnergy out;
    out.source = name_;
    for (const auto& [kind, joules] : answer.zones) {
        // The model gives totals only: all of it is dynamic for the split (MODELS.md).
        out.zones.push_back(ZoneEnergy{ZoneKey{kind, kWholeNode}, watts_to_uj(joules, 1.0), 0, {}});
    }
    return out;
}

void ExternalModel::pull(FrameId current) {
    for (Arrival& arrival : source_->take(current)) matcher_.add(std::move(arrival));
    for (MatchedAnswer& m : matcher_.take_matched()) late_.push_back(LateEnergy{m.frame, to_energy(m.answer), m.interval_s});
}

std::optional<NodeEnergy> ExternalModel::estimate(const FrameInput& in) {
    const FrameId frame{in.frame.generation(), in.frame.sequence()};
    const auto read_at = SteadyClock::now();
    const uint64_t rejected_before = matcher_.counts().rejected;
    matcher_.begin_frame(frame, read_at, in.features.interval_s);
    pull(frame);
    waited_out_ = false;
    if (options_.primary && !source_->is_recording() && !matcher_.current_answered() && matcher_.keeping_up() &&
        source_->status().attached) {
        // The one bounded wait: this model is --primary and answered the previous frame on time.
        const auto cap = std::min<SteadyClock::duration>(
            options_.wait, std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(in.features.interval_s / 4)));
        source_->wait_for(frame, read_at + cap);
        pull(frame);
        waited_out_ = !matcher_.current_answered();
    }
    rejected_this_frame_ = matcher_.counts().rejected > rejected_before;
    note_changes();
    const std::optional<EstimatesAnswer> answer = matcher_.take_current();
    if (!answer) return std::nullopt;
    return to_energy(*answer);
}

std::vector<LateEnergy> ExternalModel::take_late_answers() {
    std::vector<LateEnergy> out;
    out.swap(late_);
    return out;
}

std::string ExternalModel::no_answer_reason() const {
    const FeedStatus status = source_->status();
    if (!status.state.empty()) return status.state;
    if (rejected_this_frame_) return "answer rejected: " + matcher_.last_rejection();
    if (!matcher_.keeping_up()) return "producer is behind: the previous frame's answer was late or missing";
    if (waited_out_) return "no answer within the primary's wait; the next model answered this frame";
    return "answers arrive after their frame is estimated; compared with the meter when they do";
}

std::optional<ExternalReport> ExternalModel::external_report() const {
    const FeedStatus status = source_->status();
    ExternalReport r;
    r.segment = source_name_;
    r.producer = status.producer;
    r.version = status.version;
    r.counts = matcher_.counts();
    r.last_lag_s = matcher_.last_lag_s();
    r.arrivals_dropped = status.arrivals_dropped;
    return r;
}

void ExternalModel::note_changes() {
    const FeedStatus status = source_->status();
    if (status.state != logged_state_) {  // also true at the first call
        logged_state_ = status.state;
        messages_.push_back(status.state.empty()
                                ? fmt::format("model {}: reading estimates segment {} (model \"{}\", version \"{}\")", name_,
                                              source_name_, status.producer, status.version)
                                : fmt::format("model {}: {}", name_, status.state));
    }
    // Each reason is logged once (a hostile producer must not flood the log); the counter keeps counting.
    constexpr size_t kMaxLoggedReasons = 32;
    for (const auto& [frame, reason] : matcher_.take_rejections()) {
        if (logged_rejections_.size() >= kMaxLoggedReasons || !logged_rejections_.insert(reason).second) continue;
        messages_.push_back(fmt::format("model {}: answer for frame {} of generation {:#x} rejected ({} so far): {}{}", name_,
                                        frame.sequence, frame.generation, matcher_.counts().rejected, reason,
                                        logged_rejections_.size() == kMaxLoggedReasons ? " (further reasons are not logged)" : ""));
    }
}

std::vector<std::string> ExternalModel::take_messages() {
    std::vector<std::string> out;
    out.swap(messages_);
    return out;
}

}  // namespace kepler::estimate
