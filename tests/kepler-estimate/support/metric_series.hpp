// Reading what PrometheusExport serves, for tests: the text is parsed strictly into prometheus-cpp's data
// model (an independent reader of the exposition format), and a series is picked by labels it must
// carry (others may be present), as a PromQL selector picks it, so tests need not spell out every label.
#pragma once

#include <prometheus/metric_family.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kepler::estimate {
class PrometheusExport;
}

namespace estimate_test {

/// The families of a text exposition (format 0.0.4). Throws std::runtime_error naming the line on
/// anything malformed: a sample before its family's # HELP and # TYPE, a family split in two blocks,
/// bad label syntax or escapes, an unparsable value, a sample of another family's name.
[[nodiscard]] std::vector<prometheus::MetricFamily> parse_exposition(const std::string& text);
/// parse_exposition() of what `exporter` renders now.
[[nodiscard]] std::vector<prometheus::MetricFamily> collect(const kepler::estimate::PrometheusExport& exporter);

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
