// Prometheus export: Kepler's metric names and labels (0.7, >= 0.10 or both) for the primary model,
// kepler_model_* for every model (A/B), and the estimator's health, as text exposition. Values are read
// from a snapshot of the Estimator taken at scrape time.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/estimator.hpp"
#include "export/exposition.hpp"

namespace kepler::estimate {

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

/// What a scrape serves, over an Estimator. Thread-safe: render() holds the estimator's lock only while
/// it copies what it reads (Estimator::snapshot), then writes the exposition from the copy.
class PrometheusExport {
public:
    PrometheusExport(const Estimator& estimator, ExportOptions options) : estimator_(estimator), options_(options) {}
    [[nodiscard]] Exposition render() const;
    /// Tests: `hook` runs inside render() between the snapshot and the exposition (no lock held), so a
    /// test can hold a scrape there. Set it before the first render().
    void set_after_snapshot_hook(std::function<void()> hook) { after_snapshot_ = std::move(hook); }

private:
    const Estimator& estimator_;
    ExportOptions options_;
    std::function<void()> after_snapshot_;
};

/// Label values come from untrusted frames: bytes outside printable ASCII become '_'.
[[nodiscard]] std::string clean_label(std::string_view text);

}  // namespace kepler::estimate
