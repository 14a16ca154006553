// dcgm-exporter's text and endpoint (dcgm_exporter.hpp): the parser of what another program serves, kept
// apart from the reader's thread and HTTP so that it is fuzzed alone (tests/fuzz/fuzz_dcgm_metrics.cpp).
#include "energy/gpu/dcgm_exporter.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "common/text_io.hpp"

namespace kepler::collect {

namespace {

constexpr std::string_view kMetric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE";
constexpr size_t kMaxSamples = 4096;         // (GPU, GPU instance) pairs kept
constexpr double kMaxRatio = 1.05;           // a ratio a little above 1 is rounding; far above is no ratio

/// One label value between double quotes, with Prometheus's escapes (\\, \", \n); `pos` is past the
/// opening quote and ends past the closing one. False when the value does not end.
bool read_label_value(std::string_view line, size_t& pos, std::string& out) {
    out.clear();
    while (pos < line.size()) {
        const char c = line[pos++];
        if (c == '"') return true;
        if (c != '\\') {
            out += c;
            continue;
        }
        if (pos == line.size()) return false;
        const char e = line[pos++];
        out += e == 'n' ? '\n' : e;
    }
    return false;
}

bool is_name_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

std::optional<uint32_t> to_index(std::string_view text) {
    uint32_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return value;
}

/// One sample line of kMetric (the name already matched): its labels, then its value. Throws CollectError.
void parse_sample(std::string_view line, size_t line_number, MigActivities& out) {
    auto fail = [&](std::string_view why) {
        throw CollectError(fmt::format("dcgm-exporter line {}: {}: {}", line_number, why, line.substr(0, 200)));
    };
    size_t pos = kMetric.size();
    std::optional<uint32_t> gpu, instance;
    if (pos < line.size() && line[pos] == '{') {
        ++pos;
        std::string value;
        while (pos < line.size() && line[pos] != '}') {
            const size_t name_start = pos;
            while (pos < line.size() && is_name_char(line[pos], pos == name_start)) ++pos;
            const std::string_view name = line.substr(name_start, pos - name_start);
            if (name.empty() || pos + 1 >= line.size() || line[pos] != '=' || line[pos + 1] != '"') fail("a label is not name=\"value\"");
            pos += 2;
            if (!read_label_value(line, pos, value)) fail("a label value does not end");
            if (name == "gpu" && !(gpu = to_index(value))) fail("gpu is not an index");
            if (name == "GPU_I_ID" && !value.empty() && !(instance = to_index(value))) fail("GPU_I_ID is not an id");
            if (pos < line.size() && line[pos] == ',') ++pos;
        }
        if (pos == line.size()) fail("the labels do not end");
        ++pos;
    }
    if (pos == line.size() || (line[pos] != ' ' && line[pos] != '\t')) fail("no value");
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
    const size_t value_end = std::min(line.find_first_of(" \t", pos), line.size());
    const std::string number(line.substr(pos, value_end - pos));
    char* end = nullptr;
    const double ratio = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(ratio) || ratio < 0 || ratio > kMaxRatio) {
        fail("the value is not a ratio between 0 and 1");
    }
    if (!gpu || !instance) return;  // a whole GPU's figure, or a GPU outside MIG
    if (out.size() >= kMaxSamples && !out.contains({*gpu, *instance})) fail("more GPU instances than a node has");
    out[{*gpu, *instance}] = std::min(ratio, 1.0);
}

}  // namespace

std::string dcgm_metrics_url(std::string_view endpoint) {
    auto fail = [&](std::string_view why) { throw CollectError(fmt::format("--dcgm-endpoint {}: {}", endpoint, why)); };
    const size_t scheme_end = endpoint.find("://");
    if (scheme_end == std::string_view::npos) fail("not an http:// or https:// URL");
    const std::string_view scheme = endpoint.substr(0, scheme_end);
    if (scheme != "http" && scheme != "https") fail("the scheme must be http or https");
    const std::string_view rest = endpoint.substr(scheme_end + 3);
    const size_t path_start = std::min(rest.find('/'), rest.size());
    const std::string_view authority = rest.substr(0, path_start);
    if (authority.empty()) fail("no host");
    if (authority.find('@') != std::string_view::npos) fail("credentials do not belong in the URL");
    if (rest.find_first_of("?#\\ ") != std::string_view::npos) fail("no query, fragment, backslash or space");
    std::string url(endpoint);
    const std::string_view path = rest.substr(path_start);
    if (path.empty() || path == "/") url = fmt::format("{}://{}/metrics", scheme, authority);
    return url;
}

MigActivities parse_dcgm_activities(std::string_view text) {
    MigActivities out;
    size_t line_number = 0;
    while (!text.empty()) {
        const size_t end = std::min(text.find('\n'), text.size());
        std::string_view line = text.substr(0, end);
        text.remove_prefix(std::min(end + 1, text.size()));
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (!line.starts_with(kMetric) || line.size() == kMetric.size()) continue;
        const char next = line[kMetric.size()];
        if (next != '{' && next != ' ' && next != '\t') continue;  // a longer name that starts the same
        parse_sample(line, line_number, out);
    }
    return out;
}

}  // namespace kepler::collect
