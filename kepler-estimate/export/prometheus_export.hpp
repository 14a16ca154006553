// Prometheus export: Kepler's metric names and labels (0.7, >= 0.10 or both) for the primary model,
// kepler_model_* for every model (A/B), and the estimator's health. Values are read from a snapshot of
// the Estimator taken at scrape time.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "app/estimator.hpp"

namespace kepler_estimate {

/// Which of Kepler's name sets the Kepler-compatible families use; `both` serves each set whole.
enum class MetricNames { kepler07, kepler010, both };
/// "kepler-0.7", "kepler-0.10" or "both"; nullopt for anything else.
[[nodiscard]] std::optional<MetricNames> metric_names_from_string(std::string_view text) noexcept;

struct ExportOptions {
    bool process_metrics = false;  // kepler_process_* (capped by LedgerOptions::process_series_cap)
    bool include_timing = true;    // wall-clock dependent series (latency); off for replay output
    MetricNames names = MetricNames::kepler07;
    // Kepler 0.7 mode="idle" series when the power is modelled (Kepler: EXPOSE_ESTIMATED_IDLE_POWER_METRICS,
    // default off). On by default here: without them the containers no longer sum to the node.
    bool estimated_idle = true;
};

/// A prometheus-cpp Collectable over an Estimator. Thread-safe: Collect() holds the estimator's lock
/// only while it copies what it reads (Estimator::snapshot), then builds the families from the copy.
class PrometheusExport final : public prometheus::Collectable {
public:
    PrometheusExport(const Estimator& estimator, ExportOptions options) : estimator_(estimator), options_(options) {}
    std::vector<prometheus::MetricFamily> Collect() const override;
    /// Tests: `hook` runs inside Collect() between the snapshot and the families (no lock held), so a
    /// test can hold a scrape there. Set it before the first Collect().
    void set_after_snapshot_hook(std::function<void()> hook) { after_snapshot_ = std::move(hook); }

private:
    const Estimator& estimator_;
    ExportOptions options_;
    std::function<void()> after_snapshot_;
};

/// Text exposition format of `families` (what /metrics serves).
[[nodiscard]] std::string to_text(const std::vector<prometheus::MetricFamily>& families);
/// Label values come from untrusted frames: bytes outside printable ASCII become '_'.
[[nodiscard]] std::string clean_label(std::string_view text);

}  // namespace kepler_estimate
