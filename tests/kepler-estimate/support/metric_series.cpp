#include "support/metric_series.hpp"

#include <algorithm>
#include <numeric>

namespace estimate_test {

namespace {

bool carries(const prometheus::ClientMetric& series, const Labels& want) {
    return std::all_of(want.begin(), want.end(), [&](const auto& label) {
        return std::any_of(series.label.begin(), series.label.end(),
                           [&](const prometheus::ClientMetric::Label& l) { return l.name == label.first && l.value == label.second; });
    });
}

/// The values of the matching series, in export order.
std::vector<double> matching_values(const std::vector<prometheus::MetricFamily>& families, const std::string& family,
                                    const Labels& want) {
    std::vector<double> values;
    for (const prometheus::MetricFamily& f : families) {
        if (f.name != family) continue;
        for (const prometheus::ClientMetric& series : f.metric) {
            if (carries(series, want)) values.push_back(f.type == prometheus::MetricType::Counter ? series.counter.value : series.gauge.value);
        }
    }
    return values;
}

}  // namespace

std::optional<double> series_value(const std::vector<prometheus::MetricFamily>& families, const std::string& family,
                                   const Labels& want) {
    const std::vector<double> values = matching_values(families, family, want);
    if (values.empty()) return std::nullopt;
    return values.front();
}

double series_sum(const std::vector<prometheus::MetricFamily>& families, const std::string& family, const Labels& want) {
    const std::vector<double> values = matching_values(families, family, want);
    return std::accumulate(values.begin(), values.end(), 0.0);
}

}  // namespace estimate_test
