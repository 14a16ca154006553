#include "pipeline/estimator.hpp"

#include <fmt/format.h>

namespace kepler::estimate {

Estimator::Estimator(EstimatorOptions options)
    : options_(std::move(options)), models_(options_.models, options_.primary, options_.model_set), ledger_(options_.ledger) {}

std::vector<std::string> Estimator::refresh_models() {
    std::lock_guard lock(mutex_);
    return models_.refresh();
}

std::vector<std::string> Estimator::take_model_messages() {
    std::lock_guard lock(mutex_);
    return models_.take_messages();
}

EstimatorSnapshot Estimator::snapshot(bool processes) const {
    // SYNC POINT: the same lock as process(), refresh_models() and the count_*() calls, so that the copy
    // is all of one frame; nothing else is shared with the snapshot once it is made.
    std::lock_guard lock(mutex_);
    return EstimatorSnapshot{ledger_.copy_for_export(processes), models_.reports(), health_, node_name_};
}

void Estimator::count_missed(uint64_t frames) {
    std::lock_guard lock(mutex_);
    health_.frames_missed += frames;
}

void Estimator::record_latency(std::chrono::steady_clock::duration elapsed) {
    const double seconds = std::chrono::duration<double>(elapsed).count();
    size_t bucket = 0;
    while (bucket < kLatencyBounds.size() && seconds > kLatencyBounds[bucket]) ++bucket;
    ++health_.latency_buckets[bucket];
    health_.latency_sum_s += seconds;
    health_.last_latency_s = seconds;
}

void Estimator::count_rejected(uint64_t frames) {
    std::lock_guard lock(mutex_);
    health_.frames_rejected += frames;
}

void Estimator::note_continuity(const keplershm::FrameView& frame) {
    if (last_generation_ != 0 && frame.generation() != last_generation_) ++health_.generations_followed;
    last_generation_ = frame.generation();
    // Intervals are CLOCK_MONOTONIC, shared by every collector generation on the host: a start after the
    // previous end is time no frame covers (a collector crash and restart), energy nobody measured.
    if (covered_until_ns_ != 0 && frame.interval_start_ns() > covered_until_ns_) {
        health_.uncovered_seconds += static_cast<double>(frame.interval_start_ns() - covered_until_ns_) / 1e9;
    }
    covered_until_ns_ = std::max(covered_until_ns_, frame.interval_end_ns());
}

bool Estimator::process(const keplershm::FrameView& frame) {
    const auto started = std::chrono::steady_clock::now();
    // SYNC POINT: partner snapshot(): a scrape's copy holds this frame whole or not at all.
    std::lock_guard lock(mutex_);
    ++health_.frames_read;
    answers_.clear();
    note_continuity(frame);
    if (frame.segment().segment_kind != KEPLERSHM_SEGMENT_FRAMES) {
        ++health_.frames_rejected;
        last_error_ = fmt::format("frame {} comes from a segment of kind {}, not a collector", frame.sequence(),
                                  frame.segment().segment_kind);
        return false;
    }
    NodeFeatures features;
    try {
        features = compute_features(frame);
    } catch (const std::invalid_argument& e) {
        ++health_.frames_rejected;
        last_error_ = e.what();
        return false;
    }
    const NodeFacts node = node_facts(frame.segment());
    node_name_ = std::string(keplershm::get_text(frame.segment().node_name));
    const FrameInput input{frame, features, node};
    ModelSetResult estimate = models_.estimate(input);
    answers_ = std::move(estimate.answers);
    last_sequence_ = frame.sequence();
    last_start_ns_ = frame.interval_start_ns();
    last_end_ns_ = frame.interval_end_ns();
    if (!estimate.primary) {
        ++health_.frames_unestimated;
        last_error_ = fmt::format("frame {}: no model could estimate node power", frame.sequence());
        return false;
    }
    primary_name_ = estimate.primary_name;
    attribute(frame, *estimate.primary, options_.idle_policy, attribution_);
    ledger_.add_frame(frame, attribution_, estimate.primary->source);
    record_latency(std::chrono::steady_clock::now() - started);
    return true;
}

}  // namespace kepler::estimate
