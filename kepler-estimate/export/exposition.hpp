// The Prometheus text exposition format (version 0.0.4), written straight from the estimator's numbers.
// prometheus-cpp builds a MetricFamily object per family and a ClientMetric with its own label
// strings per series, then prints them through an ostream: 3.9 us a series, 85 ms of CPU for the
// 22,000 series of 1,000 processes (issue 18). Here a series is one append of a label set rendered
// once per entity, the name and a number (std::to_chars): well under a tenth of that.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kepler::estimate {

enum class MetricType { counter, gauge, histogram };

/// Labels rendered as the exposition writes them between braces: `a="x",b="y"`, values escaped
/// (backslash, double quote, newline), in the order added. Copy one and add to it for a series that
/// carries one label more than its entity.
class LabelSet {
public:
    LabelSet() = default;
    LabelSet(std::initializer_list<std::pair<std::string_view, std::string_view>> labels);
    LabelSet& add(std::string_view name, std::string_view value);
    [[nodiscard]] LabelSet with(std::string_view name, std::string_view value) const;
    [[nodiscard]] std::string_view text() const noexcept { return text_; }

private:
    std::string text_;
};

/// Families by name, each one contiguous block of text (# HELP, # TYPE, its series in the order added).
/// Not thread-safe: a scrape builds its own.
class Exposition {
public:
    /// A handle for add(): what is written is only reachable through the Exposition.
    class Family {
        friend class Exposition;
        std::string name_;
        // Header and series lines in chunks that are never reallocated, each twice the last (4 KiB to
        // 1 MiB): a scrape of megabytes appends without copying what it wrote (growing one string per
        // family spent a third of the scrape in memmove), and a family of one series stays small.
        std::vector<std::string> chunks_;
        size_t series_ = 0;
    };

    /// The family `name`, created with `help` and `type` on first use (later calls keep the first help).
    /// The reference stays valid for the Exposition's life: callers keep it for a run of series.
    Family& family(std::string_view name, std::string_view help, MetricType type);
    /// One series `name{labels} value` of a counter or gauge family.
    void add(Family& family, const LabelSet& labels, double value);
    /// One series whose labels are `labels` followed by `more`: an entity's labels and what its series
    /// add (mode, source), rendered once per scrape, without a copy of the entity's labels per series.
    void add(Family& family, const LabelSet& labels, const LabelSet& more, double value);
    /// Shorthand for family() + add() where a family has one or a few series.
    void add(std::string_view name, std::string_view help, MetricType type, const LabelSet& labels, double value);
    /// A histogram series: cumulative counts per upper bound (`bounds`, then +Inf as the last count).
    void add_histogram(Family& family, const LabelSet& labels, std::span<const double> bounds,
                       std::span<const uint64_t> cumulative_counts, double sum);

    /// The families in name order (identical input gives identical text), as blocks of text that
    /// concatenate into the exposition: a server writes them without copying them into one string.
    /// A family without series is left out, so callers may resolve families before knowing they have any.
    [[nodiscard]] std::vector<std::string_view> blocks() const;
    [[nodiscard]] std::string text() const;
    [[nodiscard]] size_t series() const noexcept { return series_; }

private:
    static constexpr size_t kFirstChunkBytes = 4 * 1024, kLargestChunkBytes = 1024 * 1024;
    void append_sample(Family& family, std::string_view suffix, std::string_view labels, std::string_view more,
                       double value);

    std::map<std::string, Family, std::less<>> families_;  // node-based: family() references stay valid
    size_t series_ = 0;
};

/// A double as the exposition writes it: the shortest text that reads back to the same double,
/// NaN and +Inf/-Inf as Prometheus spells them. Appends to `out`.
void append_value(std::string& out, double value);

}  // namespace kepler::estimate
