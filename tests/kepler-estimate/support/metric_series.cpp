#include "support/metric_series.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>

#include "export/prometheus_export.hpp"

namespace estimate_test {

namespace {

[[noreturn]] void fail(size_t line_number, const std::string& what) {
    throw std::runtime_error("exposition line " + std::to_string(line_number) + ": " + what);
}

double parse_value(std::string_view text, size_t line_number) {
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (text == "+Inf") return std::numeric_limits<double>::infinity();
    if (text == "-Inf") return -std::numeric_limits<double>::infinity();
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) fail(line_number, "bad value '" + std::string(text) + "'");
    return value;
}

/// `a="x",b="y"` (escapes \\, \", \n) into labels; the rest of the line after the closing brace is returned.
std::string_view parse_labels(std::string_view text, std::vector<prometheus::ClientMetric::Label>& labels, size_t n) {
    while (true) {
        const size_t eq = text.find('=');
        if (eq == std::string_view::npos || eq == 0 || eq + 1 >= text.size() || text[eq + 1] != '"') fail(n, "bad label");
        prometheus::ClientMetric::Label label{std::string(text.substr(0, eq)), {}};
        size_t i = eq + 2;
        for (; i < text.size() && text[i] != '"'; ++i) {
            if (text[i] != '\\') {
                label.value += text[i];
                continue;
            }
            if (++i >= text.size()) fail(n, "escape at end of line");
            if (text[i] == 'n') label.value += '\n';
            else if (text[i] == '\\' || text[i] == '"') label.value += text[i];
            else fail(n, "bad escape");
        }
        if (i >= text.size()) fail(n, "unterminated label value");
        labels.push_back(std::move(label));
        text.remove_prefix(i + 1);
        if (text.starts_with(",")) {
            text.remove_prefix(1);
            continue;
        }
        if (!text.starts_with("}")) fail(n, "expected , or }");
        return text.substr(1);
    }
}

prometheus::MetricType type_from(std::string_view name, size_t n) {
    if (name == "counter") return prometheus::MetricType::Counter;
    if (name == "gauge") return prometheus::MetricType::Gauge;
    if (name == "histogram") return prometheus::MetricType::Histogram;
    fail(n, "unknown type " + std::string(name));
}

/// One sample line into the family it must belong to (a histogram's _bucket/_sum/_count fill one metric).
void add_sample(prometheus::MetricFamily& f, std::string_view line, size_t n) {
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos) fail(n, "sample without value");
    const std::string_view name = line.substr(0, name_end);
    std::vector<prometheus::ClientMetric::Label> labels;
    std::string_view rest = line.substr(name_end);
    if (rest.starts_with("{")) rest = parse_labels(rest.substr(1), labels, n);
    if (!rest.starts_with(" ")) fail(n, "expected a space before the value");
    const double value = parse_value(rest.substr(1), n);
    if (f.type != prometheus::MetricType::Histogram) {
        if (name != f.name) fail(n, "sample " + std::string(name) + " inside family " + f.name);
        prometheus::ClientMetric m;
        m.label = std::move(labels);
        (f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value) = value;
        f.metric.push_back(std::move(m));
        return;
    }
    if (name == f.name + "_bucket") {
        if (labels.empty() || labels.back().name != "le") fail(n, "bucket without le");
        const double bound = parse_value(labels.back().value, n);
        labels.pop_back();
        if (f.metric.empty() || f.metric.back().histogram.sample_count != 0 || f.metric.back().label != labels) {
            f.metric.emplace_back().label = labels;
        }
        f.metric.back().histogram.bucket.push_back({static_cast<uint64_t>(value), bound});
    } else if (name == f.name + "_sum" && !f.metric.empty()) {
        f.metric.back().histogram.sample_sum = value;
    } else if (name == f.name + "_count" && !f.metric.empty()) {
        f.metric.back().histogram.sample_count = static_cast<uint64_t>(value);
    } else {
        fail(n, "sample " + std::string(name) + " inside histogram " + f.name);
    }
}

}  // namespace

std::vector<prometheus::MetricFamily> parse_exposition(const std::string& text) {
    std::vector<prometheus::MetricFamily> families;
    std::set<std::string> seen;
    std::istringstream lines(text);
    size_t n = 0;
    for (std::string line; std::getline(lines, line);) {
        ++n;
        if (line.starts_with("# HELP ")) {
            const size_t space = line.find(' ', 7);
            if (space == std::string::npos) fail(n, "HELP without text");
            prometheus::MetricFamily f;
            f.name = line.substr(7, space - 7);
            f.help = line.substr(space + 1);
            if (!seen.insert(f.name).second) fail(n, "family " + f.name + " appears twice");
            families.push_back(std::move(f));
        } else if (line.starts_with("# TYPE ")) {
            const size_t space = line.find(' ', 7);
            if (families.empty() || space == std::string::npos || line.substr(7, space - 7) != families.back().name) {
                fail(n, "TYPE without its HELP");
            }
            families.back().type = type_from(std::string_view(line).substr(space + 1), n);
        } else {
            if (families.empty() || families.back().type == prometheus::MetricType::Untyped) fail(n, "sample before its # TYPE");
            add_sample(families.back(), line, n);
        }
    }
    return families;
}

std::vector<prometheus::MetricFamily> collect(const kepler::estimate::PrometheusExport& exporter) {
    return parse_exposition(exporter.render().text());
}

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
