// Reading what PrometheusExport::Collect() returned, for tests: a series is picked by labels it must
// carry (others may be present), as a PromQL selector picks it, so tests need not spell out every label.
#pragma once

#include <prometheus/metric_family.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace estimate_test {

/// Label name/value pairs a series must all carry.
using Labels = std::vector<std::pair<std::string, std::string>>;

/// The value (counter or gauge) of the first series of `family` carrying every label of `want`;
/// nullopt when none does.
[[nodiscard]] std::optional<double> series_value(const std::vector<prometheus::MetricFamily>& families,
                                                 const std::string& family, const Labels& want = {});
/// The sum over every series of `family` carrying every label of `want` (0 when none does).
[[nodiscard]] double series_sum(const std::vector<prometheus::MetricFamily>& families, const std::string& family,
                                const Labels& want = {});

}  // namespace estimate_test
