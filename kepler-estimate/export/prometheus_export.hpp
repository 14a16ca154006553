// Prometheus export: Kepler 0.7 metric names and labels for the primary model, kepler_model_* for
// every model (A/B), and the estimator's health. Values are read from the Estimator at scrape time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "app/estimator.hpp"

namespace kepler_estimate {

struct ExportOptions {
    bool process_metrics = false;  // kepler_process_* (capped by LedgerOptions::process_series_cap)
    bool include_timing = true;    // wall-clock dependent series (latency); off for replay output
};

/// A prometheus-cpp Collectable over an Estimator. Thread-safe: Collect() locks the estimator.
class PrometheusExport final : public prometheus::Collectable {
public:
    PrometheusExport(const Estimator& estimator, ExportOptions options) : estimator_(estimator), options_(options) {}
    std::vector<prometheus::MetricFamily> Collect() const override;

private:
    const Estimator& estimator_;
    ExportOptions options_;
};

/// Text exposition format of `families` (what /metrics serves).
[[nodiscard]] std::string to_text(const std::vector<prometheus::MetricFamily>& families);
/// Label values come from untrusted frames: bytes outside printable ASCII become '_'.
[[nodiscard]] std::string clean_label(std::string_view text);

}  // namespace kepler_estimate
