#include "export/exposition.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace kepler::estimate {

namespace {

/// Label values escape backslash, double quote and newline; HELP text escapes backslash and newline.
/// Runs without anything to escape are appended whole (label values rarely have any). The scan is a
/// plain loop: string_view::find_first_of calls memchr on the set once per character, which was a
/// tenth of the estimator's CPU with 1,000 process series scraped every second.
void append_escaped(std::string& out, std::string_view text, bool quote) {
    const auto special = [quote](char c) { return c == '\\' || c == '\n' || (quote && c == '"'); };
    for (auto run = text.begin();;) {
        const auto at = std::find_if(run, text.end(), special);
        out.append(run, at);
        if (at == text.end()) return;
        out += *at == '\n' ? "\\n" : *at == '"' ? "\\\"" : "\\\\";
        run = at + 1;
    }
}

std::string_view type_name(MetricType type) {
    switch (type) {
        case MetricType::counter: return "counter";
        case MetricType::gauge: return "gauge";
        case MetricType::histogram: return "histogram";
    }
    return "untyped";
}

/// The shortest text that reads back to the same double needs at most 24 characters.
constexpr size_t kMaxValueChars = 32;

/// Writes `value` as the exposition spells it at `at`; returns the end.
char* write_value(char* at, double value) {
    if (std::isnan(value)) return std::copy_n("NaN", 3, at);
    if (std::isinf(value)) return std::copy_n(value < 0 ? "-Inf" : "+Inf", 4, at);
    return std::to_chars(at, at + kMaxValueChars, value).ptr;
}

}  // namespace

void append_value(std::string& out, double value) {
    char buffer[kMaxValueChars];
    out.append(buffer, write_value(buffer, value));
}

LabelSet::LabelSet(std::initializer_list<std::pair<std::string_view, std::string_view>> labels) {
    size_t size = 0;  // without escapes, which are rare: one allocation instead of one per doubling
    for (const auto& [name, value] : labels) size += name.size() + value.size() + 4;  // ,name="value"
    text_.reserve(size);
    for (const auto& [name, value] : labels) add(name, value);
}

LabelSet& LabelSet::add(std::string_view name, std::string_view value) {
    if (!text_.empty()) text_ += ',';
    text_ += name;
    text_ += "=\"";
    append_escaped(text_, value, true);
    text_ += '"';
    return *this;
}

LabelSet LabelSet::with(std::string_view name, std::string_view value) const {
    LabelSet out = *this;
    out.add(name, value);
    return out;
}

Exposition::Family& Exposition::family(std::string_view name, std::string_view help, MetricType type) {
    auto found = families_.find(name);
    if (found != families_.end()) return found->second;
    Family& f = families_.emplace(std::string(name), Family{}).first->second;
    f.name_ = std::string(name);
    std::string& out = f.chunks_.emplace_back();
    out.reserve(kFirstChunkBytes);
    out += "# HELP ";
    out += name;
    out += ' ';
    append_escaped(out, help, false);
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type_name(type);
    out += '\n';
    return f;
}

void Exposition::append_sample(Family& family, std::string_view suffix, std::string_view labels, std::string_view more,
                               double value) {
    // Escapes are done (labels are rendered), so the line's length is known but for its value (<= 24).
    const size_t line = family.name_.size() + suffix.size() + labels.size() + more.size() + kMaxValueChars + 5;  // {,} \n
    if (family.chunks_.back().capacity() - family.chunks_.back().size() < line) {
        const size_t next = std::min(2 * family.chunks_.back().capacity(), kLargestChunkBytes);
        family.chunks_.emplace_back().reserve(std::max(next, line));
    }
    // Written through a pointer into room made once: a dozen appends, each checking capacity, were a
    // tenth of a scrape. The room is then cut to what was written.
    std::string& out = family.chunks_.back();
    const size_t start = out.size();
    out.resize(start + line);
    char* at = out.data() + start;
    const auto put = [&at](std::string_view text) { at = std::copy(text.begin(), text.end(), at); };
    put(family.name_);
    put(suffix);
    if (!labels.empty() || !more.empty()) {
        *at++ = '{';
        put(labels);
        if (!labels.empty() && !more.empty()) *at++ = ',';
        put(more);
        *at++ = '}';
    }
    *at++ = ' ';
    at = write_value(at, value);
    *at++ = '\n';
    out.resize(static_cast<size_t>(at - out.data()));
}

void Exposition::add(Family& family, const LabelSet& labels, double value) { add(family, labels, LabelSet(), value); }

void Exposition::add(Family& family, const LabelSet& labels, const LabelSet& more, double value) {
    append_sample(family, {}, labels.text(), more.text(), value);
    ++family.series_;
    ++series_;
}

void Exposition::add(std::string_view name, std::string_view help, MetricType type, const LabelSet& labels, double value) {
    add(family(name, help, type), labels, value);
}

void Exposition::add_histogram(Family& family, const LabelSet& labels, std::span<const double> bounds,
                               std::span<const uint64_t> cumulative_counts, double sum) {
    // One count per bound plus the +Inf bucket, which is also the sample count.
    std::string le;
    for (size_t i = 0; i < cumulative_counts.size(); ++i) {
        le.clear();
        if (i < bounds.size()) append_value(le, bounds[i]);
        else le = "+Inf";
        append_sample(family, "_bucket", labels.text(), LabelSet{{"le", le}}.text(), static_cast<double>(cumulative_counts[i]));
    }
    append_sample(family, "_sum", labels.text(), {}, sum);
    append_sample(family, "_count", labels.text(), {},
                  cumulative_counts.empty() ? 0.0 : static_cast<double>(cumulative_counts.back()));
    ++family.series_;
    ++series_;
}

std::vector<std::string_view> Exposition::blocks() const {
    std::vector<std::string_view> out;
    out.reserve(families_.size());
    for (const auto& [_, f] : families_) {
        if (f.series_ == 0) continue;
        for (const std::string& chunk : f.chunks_) out.emplace_back(chunk);
    }
    return out;
}

std::string Exposition::text() const {
    const std::vector<std::string_view> parts = blocks();
    size_t size = 0;
    for (const std::string_view part : parts) size += part.size();
    std::string out;
    out.reserve(size);
    for (const std::string_view part : parts) out += part;
    return out;
}

}  // namespace kepler::estimate
