#include "export/prometheus_export.hpp"

#include "export/families.hpp"

#include <fmt/format.h>

#include <time.h>

#include <array>

namespace kepler::estimate {

namespace {

using families::joules;

/// The estimates channel of an external model (PROTOCOL.md §8): how its answers fared.
void add_external(Exposition& b, const std::string& model, const ExternalReport& x) {
    b.add("kepler_model_external_info", "External model behind an estimates segment: its own name and version",
          MetricType::gauge,
          {{"model", model}, {"segment", clean_label(x.segment)}, {"producer", clean_label(x.producer)},
           {"version", clean_label(x.version)}},
          1);
    const AnswerCounts& c = x.counts;
    const std::string help = "Answers of an external model matched to a frame: ready (there when the frame was estimated), "
                             "on_time (within one interval) or late";
    b.add("kepler_model_answers_total", help, MetricType::counter, {{"model", model}, {"timing", "ready"}},
          static_cast<double>(c.used));
    b.add("kepler_model_answers_total", help, MetricType::counter, {{"model", model}, {"timing", "on_time"}},
          static_cast<double>(c.answers - c.used - c.late));
    b.add("kepler_model_answers_total", help, MetricType::counter, {{"model", model}, {"timing", "late"}},
          static_cast<double>(c.late));
    b.add("kepler_model_missing_answers_total", "Frames an external model did not answer while the estimator remembered them",
          MetricType::counter, {{"model", model}}, static_cast<double>(c.missing));
    b.add("kepler_model_rejected_answers_total",
          "Answers refused: invalid rows, wrong segment kind, unknown or forgotten frame, duplicates", MetricType::counter,
          {{"model", model}}, static_cast<double>(c.rejected));
    b.add("kepler_model_dropped_answers_total",
          "Estimates frames not read: the producer published faster than the estimator takes them", MetricType::counter,
          {{"model", model}}, static_cast<double>(x.arrivals_dropped));
    if (x.last_lag_s) {
        b.add("kepler_model_answer_lag_seconds", "From reading a frame to the arrival of its latest matched answer",
              MetricType::gauge, {{"model", model}}, *x.last_lag_s);
    }
}

void add_models(Exposition& b, const EstimatorSnapshot& est) {
    for (const ModelReport& r : est.models) {
        const std::string model = clean_label(r.name);
        b.add("kepler_model_info", "Configured node models; selected=\"true\" is the one behind the kepler_node/container names",
              MetricType::gauge, {{"model", model}, {"kind", r.kind}, {"selected", r.selected ? "true" : "false"}, {"reason", clean_label(r.reason)}}, 1);
        b.add("kepler_model_loads_total", "Model files loaded (first load and reloads)", MetricType::counter, {{"model", model}},
              static_cast<double>(r.loads));
        b.add("kepler_model_load_errors_total", "Model files rejected as bad (the previous model keeps running)",
              MetricType::counter, {{"model", model}}, static_cast<double>(r.load_errors));
        b.add("kepler_model_prediction_errors_total", "Predictions that failed", MetricType::counter, {{"model", model}},
              static_cast<double>(r.estimate_errors));
        for (const auto& [kind, uj] : r.energy_uj) {
            const LabelSet labels = {{"model", model}, {"zone", zone_name(kind)}};
            b.add("kepler_model_node_joules_total", "Node energy according to each model, in joules", MetricType::counter, labels,
                  joules(uj));
        }
        for (const auto& [kind, w] : r.watts) {
            b.add("kepler_model_node_watts", "Node power according to each model over the last interval, in watts",
                  MetricType::gauge, {{"model", model}, {"zone", zone_name(kind)}}, w);
        }
        for (const auto& [kind, w] : r.abs_error_w) {
            b.add("kepler_model_absolute_error_watts", "Absolute error against the power meter over the last interval, in watts",
                  MetricType::gauge, {{"model", model}, {"zone", zone_name(kind)}}, w);
        }
        for (const auto& [kind, w] : r.expected_error_w) {
            b.add("kepler_model_expected_error_watts",
                  "The model's mean absolute error on held-out time blocks of its training data, each predicted by the model chosen without it (nested), in watts",
                  MetricType::gauge, {{"model", model}, {"zone", zone_name(kind)}}, w);
        }
        for (const auto& [feature, outside] : r.outside_training_range) {
            b.add("kepler_model_extrapolating",
                  "1 where the last frame's feature lay outside the range the model was trained on (the model extrapolated), else 0",
                  MetricType::gauge, {{"model", model}, {"feature", feature}}, outside ? 1 : 0);
        }
        if (!r.outside_training_range.empty()) {
            b.add("kepler_model_extrapolated_frames_total", "Frames with a feature outside the model's training range",
                  MetricType::counter, {{"model", model}}, static_cast<double>(r.extrapolated_frames));
        }
        for (const auto& [kind, m] : r.mape) {
            b.add("kepler_model_mape_ratio", "Rolling mean absolute percentage error against the meter, as a ratio",
                  MetricType::gauge, {{"model", model}, {"zone", zone_name(kind)}}, m);
        }
        if (r.external) add_external(b, model, *r.external);
    }
}

void add_health(Exposition& b, const EstimatorSnapshot& est, bool timing) {
    const Health& h = est.health;
    b.add("kepler_estimator_frames_read_total", "Frames the estimator read", MetricType::counter, {}, static_cast<double>(h.frames_read));
    b.add("kepler_estimator_frames_missed_total", "Frames published by the collector that the estimator never read",
          MetricType::counter, {}, static_cast<double>(h.frames_missed));
    b.add("kepler_estimator_frames_rejected_total", "Broken frames skipped", MetricType::counter, {}, static_cast<double>(h.frames_rejected));
    b.add("kepler_estimator_frames_unestimated_total", "Frames no model could estimate", MetricType::counter, {},
          static_cast<double>(h.frames_unestimated));
    b.add("kepler_estimator_frames_cut_inexact_total",
          "Frames whose processes' CPU time the collector could not cut exactly at the frame's end (a slice may sit in "
          "the neighbouring frame; totals hold)",
          MetricType::counter, {}, static_cast<double>(h.frames_cut_inexact));
    b.add("kepler_estimator_collector_generations_total",
          "New collector segment generations followed after the first (collector restarts and segment growth)",
          MetricType::counter, {}, static_cast<double>(h.generations_followed));
    b.add("kepler_estimator_uncovered_seconds_total",
          "Time between frames that no interval covers (collector down): energy nobody measured", MetricType::counter,
          {}, h.uncovered_seconds);
    uint64_t model_errors = 0;
    for (const ModelReport& r : est.models) model_errors += r.load_errors + r.estimate_errors;
    b.add("kepler_estimator_model_errors_total", "Model load and prediction errors, all models", MetricType::counter, {},
          static_cast<double>(model_errors));
    b.add("kepler_estimator_process_series_refused_total", "Processes left without series by the series cap",
          MetricType::counter, {}, static_cast<double>(est.ledger.process_series_refused()));
    if (h.gpu_devices_allocated >= 0) {  // --pod-resources is read
        b.add("kepler_estimator_gpu_devices_allocated", "GPU devices the kubelet's pod-resources API allocates to containers (last answer)",
              MetricType::gauge, {}, static_cast<double>(h.gpu_devices_allocated));
        b.add("kepler_estimator_pod_resources_errors_total", "Calls to the kubelet's pod-resources API that failed",
              MetricType::counter, {}, static_cast<double>(h.pod_resources_errors));
    }
    if (!timing) return;
    // The monitoring stack's own energy is in its process series; this lets a user subtract its CPU.
    timespec self{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &self);
    b.add("kepler_estimator_self_cpu_seconds_total", "CPU time the estimator itself has used (all threads), in seconds",
          MetricType::counter, {}, static_cast<double>(self.tv_sec) + static_cast<double>(self.tv_nsec) / 1e9);
    std::array<uint64_t, kLatencyBounds.size() + 1> cumulative{};
    uint64_t count = 0;
    for (size_t i = 0; i < h.latency_buckets.size(); ++i) cumulative[i] = count += h.latency_buckets[i];
    b.add_histogram(b.family("kepler_estimator_frame_latency_seconds", "Time to estimate one frame", MetricType::histogram), {},
                    kLatencyBounds, cumulative, h.latency_sum_s);
}

}  // namespace

std::string clean_label(std::string_view text) {
    std::string out(text);
    for (char& c : out) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f) c = '_';
    }
    return out;
}

std::optional<MetricNames> metric_names_from_string(std::string_view text) noexcept {
    if (text == "kepler-0.7") return MetricNames::kepler07;
    if (text == "kepler-0.10") return MetricNames::kepler010;
    if (text == "both") return MetricNames::both;
    return std::nullopt;
}

// Issue 18: a scrape never holds the estimator's lock while it writes the exposition: it copies what they read under the lock (Estimator::snapshot: ~20 us, ~0.2 ms with 1,000 process
// series), so a frame waits at most that long, and builds from its own copy, all of one frame. The copy is
// made when a scrape asks, not published after every frame: scrapes are often 30 s apart, and most frames
// would be copied for nobody. (Building on the pipeline thread between frames would make the scrape wait
// for a thread that sleeps in FrameSource::next, and would need a handshake for no shorter frame wait.)
Exposition PrometheusExport::render() const {
    const EstimatorSnapshot snapshot = estimator_.snapshot(options_.process_metrics);
    if (after_snapshot_) after_snapshot_();
    Exposition b;
    // The two sets share no family name, so `both` counts nothing twice within either set.
    if (options_.names != MetricNames::kepler010) families::add_kepler07(b, snapshot, options_);
    if (options_.names != MetricNames::kepler07) families::add_kepler010(b, snapshot, options_);
    families::add_platform(b, snapshot);
    add_models(b, snapshot);
    add_health(b, snapshot, options_.include_timing);
    return b;
}

}  // namespace kepler::estimate
