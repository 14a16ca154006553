// The pipeline for one frame: features → node models → attribution → ledger. The terminal view and the
// CSV writer read the result on the pipeline thread; exporters on other threads read a snapshot().
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "aggregate/ledger.hpp"
#include "attribute/attribution.hpp"
#include "keplershm/keplershm.hpp"
#include "select/model_set.hpp"

namespace kepler::estimate {

struct EstimatorOptions {
    std::vector<ModelSpec> models;
    std::optional<std::string> primary;
    IdlePolicy idle_policy = IdlePolicy::cpu_share;
    LedgerOptions ledger;
    ModelSetOptions model_set;
};

/// Upper bounds (seconds) of the per-frame latency histogram.
inline constexpr std::array<double, 8> kLatencyBounds = {1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 1.0};

/// The estimator's own health. Plain value.
struct Health {
    uint64_t frames_read = 0;
    uint64_t frames_missed = 0;    // frames the collector published that this estimator never saw
    uint64_t frames_rejected = 0;  // broken frames (e.g. an empty interval), counted and skipped
    uint64_t frames_unestimated = 0;  // no model could give node energy
    uint64_t frames_cut_inexact = 0;  // the collector could not cut the processes' CPU time exactly (CUT_INEXACT)
    uint64_t generations_followed = 0;  // new collector segment generations after the first (restart, growth)
    double uncovered_seconds = 0;       // time between consecutive frames that no interval covers (collector down)
    std::array<uint64_t, kLatencyBounds.size() + 1> latency_buckets{};  // last one: +Inf
    double latency_sum_s = 0;
    double last_latency_s = 0;
    int64_t gpu_devices_allocated = -1;  // in the kubelet's last pod-resources answer; -1: not read
    uint64_t pod_resources_errors = 0;   // pod-resources calls that failed
};

/// What the exporters on other threads read, copied under the estimator's lock: every part is from the
/// same frame, and the copy's owner reads it without the lock for as long as it likes. Plain value.
struct EstimatorSnapshot {
    Ledger ledger;
    std::vector<ModelReport> models;
    Health health;
    std::string node_name;
};

/// Thread-safe as used: one pipeline thread calls process() and the other mutators; other threads only
/// take a snapshot(), which holds the lock only while it copies. process() holds it only while it
/// publishes a frame (ledger, model reports, health), not while the models run.
class Estimator {
public:
    explicit Estimator(EstimatorOptions options);

    /// Runs one frame (a private copy or a validated view) through the pipeline.
    /// Returns false when the frame was rejected or no model could estimate it.
    bool process(const keplershm::FrameView& frame);
    /// Frames lost before the next one (from the reader).
    void count_missed(uint64_t frames);
    /// Frames the reader refused as corrupt (they never reach process()).
    void count_rejected(uint64_t frames);
    /// The kubelet's GPU allocations the next frames are attributed with (kube/; null: none), and how many
    /// of its calls failed so far (for the health metrics).
    void set_gpu_allocations(std::shared_ptr<const GpuAllocations> allocations, uint64_t errors = 0);
    /// Loads model files that appeared or changed; returns log lines.
    std::vector<std::string> refresh_models();
    /// Log lines of the models since the last call (e.g. an external model's producer came or went).
    std::vector<std::string> take_model_messages();

    /// A copy of what the exporters read, under the lock: the only time a scrape holds it. Without
    /// `processes` the ledger's process table (its largest part, read only for process series) stays behind.
    [[nodiscard]] EstimatorSnapshot snapshot(bool processes) const;

    // The accessors below are for the pipeline thread (the only writer) and single-threaded tests;
    // other threads use snapshot().
    [[nodiscard]] const Ledger& ledger() const noexcept { return ledger_; }
    [[nodiscard]] const ModelSet& models() const noexcept { return models_; }
    [[nodiscard]] const Health& health() const noexcept { return health_; }
    [[nodiscard]] const Attribution& last_attribution() const noexcept { return attribution_; }
    /// Every model's answer for the last frame process() was given (empty when it was rejected).
    [[nodiscard]] const std::vector<ModelAnswer>& last_answers() const noexcept { return answers_; }
    [[nodiscard]] const std::string& node_name() const noexcept { return node_name_; }
    [[nodiscard]] const std::string& primary_model() const noexcept { return primary_name_; }
    [[nodiscard]] IdlePolicy idle_policy() const noexcept { return options_.idle_policy; }
    /// Last frame's sequence and interval (collector clock).
    [[nodiscard]] uint64_t last_sequence() const noexcept { return last_sequence_; }
    [[nodiscard]] uint64_t last_interval_start_ns() const noexcept { return last_start_ns_; }
    [[nodiscard]] uint64_t last_interval_end_ns() const noexcept { return last_end_ns_; }
    [[nodiscard]] std::string last_error() const { return last_error_; }

    /// Tests: called on the pipeline thread after the models answered a frame and before it is
    /// published, without the lock (a scrape taken then must not wait).
    void set_after_models_hook(std::function<void()> hook) { after_models_hook_ = std::move(hook); }

private:
    /// The frame's features, or nullopt with `why` when the frame is not one to estimate.
    [[nodiscard]] std::optional<NodeFeatures> admit(const keplershm::FrameView& frame, std::string& why) const;
    void record_latency(std::chrono::steady_clock::duration elapsed);
    /// Counts generation changes and time no frame covers (caller holds mutex_).
    void note_continuity(const keplershm::FrameView& frame);

    EstimatorOptions options_;
    mutable std::mutex mutex_;
    ModelSet models_;                  // the pipeline thread's: scrapes read reports_
    std::vector<ModelReport> reports_;  // models_.reports() as of the last published frame or reload
    std::function<void()> after_models_hook_;
    Ledger ledger_;
    Attribution attribution_;
    std::shared_ptr<const GpuAllocations> gpu_allocations_;
    std::vector<ModelAnswer> answers_;
    Health health_;
    std::string node_name_;
    std::string primary_name_;
    std::string last_error_;
    uint64_t last_sequence_ = 0, last_start_ns_ = 0, last_end_ns_ = 0;
    uint64_t last_generation_ = 0;   // of the previous frame read
    uint64_t covered_until_ns_ = 0;  // end of the latest interval read
};

}  // namespace kepler::estimate
