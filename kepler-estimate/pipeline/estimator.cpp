#include "pipeline/estimator.hpp"

#include <fmt/format.h>

#include "external/external_model.hpp"

namespace kepler::estimate {

namespace {

/// Selection knows models only as NodeModels; the external kind (PROTOCOL.md §8) is made here.
EstimatorOptions with_external_models(EstimatorOptions options) {
    ModelSetOptions& set = options.model_set;
    if (set.make_external) return options;
    set.make_external = [wait = set.external_wait, window = set.external_window, reader = set.external_reader](
                            const ModelSpec& spec, bool primary) -> std::unique_ptr<NodeModel> {
        ExternalOptions external;
        external.wait = wait;
        external.primary = primary;
        external.matcher.window_frames = window;
        external.reader = reader;
        return std::make_unique<ExternalModel>(spec.name, spec.source, external);
    };
    return options;
}

}  // namespace

Estimator::Estimator(EstimatorOptions options)
    : options_(with_external_models(std::move(options))), models_(options_.models, options_.primary, options_.model_set),
      reports_(models_.reports()), ledger_(options_.ledger) {}

std::vector<std::string> Estimator::refresh_models() {
    std::vector<std::string> messages = models_.refresh();  // the pipeline thread's own: no lock
    // SYNC POINT: partner snapshot(): loads and rejections show in the reports a scrape copies.
    std::lock_guard lock(mutex_);
    reports_ = models_.reports();
    return messages;
}

std::vector<std::string> Estimator::take_model_messages() { return models_.take_messages(); }

EstimatorSnapshot Estimator::snapshot(bool processes) const {
    // SYNC POINT: the same lock as process()'s publishing step, refresh_models() and the count_*() calls,
    // so that the copy is all of one frame; nothing else is shared with the snapshot once it is made.
    std::lock_guard lock(mutex_);
    return EstimatorSnapshot{ledger_.copy_for_export(processes), reports_, health_, node_name_};
}

void Estimator::set_gpu_allocations(std::shared_ptr<const GpuAllocations> allocations, uint64_t errors) {
    const int64_t devices = allocations ? static_cast<int64_t>(allocations->by_device.size()) : -1;
    gpu_allocations_ = std::move(allocations);
    std::lock_guard lock(mutex_);
    health_.gpu_devices_allocated = devices;
    health_.pod_resources_errors = errors;
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

std::optional<NodeFeatures> Estimator::admit(const keplershm::FrameView& frame, std::string& why) const {
    if (frame.segment().segment_kind != KEPLERSHM_SEGMENT_FRAMES) {
        why = fmt::format("frame {} comes from a segment of kind {}, not a collector", frame.sequence(), frame.segment().segment_kind);
        return std::nullopt;
    }
    try {
        return compute_features(frame);
    } catch (const std::invalid_argument& e) {
        why = e.what();
        return std::nullopt;
    }
}

// The models run (an external one may be waited for) and the frame is attributed without the lock: only
// this thread touches the models, the attribution and the answers. What scrapes read (ledger, reports,
// health) changes afterwards, all at once, under the lock.
bool Estimator::process(const keplershm::FrameView& frame) {
    const auto started = std::chrono::steady_clock::now();
    answers_.clear();
    std::string rejected;
    const std::optional<NodeFeatures> features = admit(frame, rejected);
    std::optional<NodeEnergy> primary;
    if (features) {
        const NodeFacts node = node_facts(frame.segment());
        ModelSetResult estimate = models_.estimate(FrameInput{frame, *features, node});
        if (after_models_hook_) after_models_hook_();
        answers_ = std::move(estimate.answers);
        primary = std::move(estimate.primary);
        if (primary) {
            primary_name_ = estimate.primary_name;
            attribute(frame, *primary, options_.idle_policy, attribution_, gpu_allocations_.get());
        }
    }
    // SYNC POINT: partner snapshot(): a scrape's copy holds this frame whole or not at all.
    std::lock_guard lock(mutex_);
    ++health_.frames_read;
    if (frame.header().flags & KEPLERSHM_FRAME_CUT_INEXACT) ++health_.frames_cut_inexact;
    note_continuity(frame);
    if (!features) {
        ++health_.frames_rejected;
        last_error_ = rejected;
        return false;
    }
    node_name_ = std::string(keplershm::get_text(frame.segment().node_name));
    last_sequence_ = frame.sequence();
    last_start_ns_ = frame.interval_start_ns();
    last_end_ns_ = frame.interval_end_ns();
    reports_ = models_.reports();
    if (!primary) {
        ++health_.frames_unestimated;
        last_error_ = fmt::format("frame {}: no model could estimate node power", frame.sequence());
        return false;
    }
    ledger_.add_frame(frame, attribution_, primary->source);
    record_latency(std::chrono::steady_clock::now() - started);
    return true;
}

}  // namespace kepler::estimate
