// Node-level features of one frame, exactly as MODELS.md "Node features" defines them, so a model
// trained offline sees the same numbers here.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "keplershm/keplershm.hpp"

namespace kepler::estimate {

enum class Feature : uint8_t {
    cpu_time_ms_per_s,
    node_cpu_busy_ms_per_s,
    cpu_count,
    cycles_per_s,
    instructions_per_s,
    cache_misses_per_s,
    page_cache_hits_per_s,
    softirq_net_tx_per_s,
    softirq_net_rx_per_s,
    softirq_block_per_s,
};
inline constexpr size_t kFeatureCount = 10;

[[nodiscard]] std::string_view feature_name(Feature feature) noexcept;
[[nodiscard]] std::string_view feature_unit(Feature feature) noexcept;
[[nodiscard]] std::optional<Feature> feature_from_name(std::string_view name) noexcept;
/// The metric bit (enum keplershm_metric) a feature needs; 0 for features every node has.
[[nodiscard]] uint64_t feature_metric(Feature feature) noexcept;
/// Name of a metric bit ("CYCLES"), for refusal reasons.
[[nodiscard]] std::string metric_bit_name(uint64_t bit);

/// Feature values of one frame; a feature whose metric the frame lacks is unavailable (nullopt),
/// never zero. Plain value.
struct NodeFeatures {
    double interval_s = 0;
    std::array<std::optional<double>, kFeatureCount> values{};

    [[nodiscard]] const std::optional<double>& operator[](Feature f) const noexcept {
        return values[static_cast<size_t>(f)];
    }
};

/// Computes the features of `frame` (bounds are the view's; records are read once each).
/// Throws std::invalid_argument when the interval is empty or reversed.
[[nodiscard]] NodeFeatures compute_features(const keplershm::FrameView& frame);

}  // namespace kepler::estimate
