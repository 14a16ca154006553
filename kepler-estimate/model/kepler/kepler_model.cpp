#include "model/kepler/kepler_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "model/model_metadata.hpp"

namespace kepler::estimate {

namespace {

// Kepler 0.7's names (kepler-model-server train_types.py) for the node totals our frames carry.
constexpr std::array<std::pair<std::string_view, Feature>, 8> kKeplerNames = {{
    {"bpf_cpu_time_ms", Feature::cpu_time_ms_per_s},
    {"bpf_page_cache_hit", Feature::page_cache_hits_per_s},
    {"bpf_net_tx_irq", Feature::softirq_net_tx_per_s},
    {"bpf_net_rx_irq", Feature::softirq_net_rx_per_s},
    {"bpf_block_irq", Feature::softirq_block_per_s},
    {"cpu_cycles", Feature::cycles_per_s},
    {"cpu_instructions", Feature::instructions_per_s},
    {"cache_miss", Feature::cache_misses_per_s},
}};

}  // namespace

std::optional<Feature> kepler_feature(std::string_view kepler_name) noexcept {
    for (const auto& [name, feature] : kKeplerNames) {
        if (name == kepler_name) return feature;
    }
    return std::nullopt;
}

KeplerModel::KeplerModel(std::string name, const std::filesystem::path& path, int threads, std::string note)
    : name_(std::move(name)), note_(std::move(note)), predictor_(load_kepler_model(path, threads)) {
    for (const std::string& f : predictor_->features()) columns_.push_back(kepler_feature(f));
}

std::optional<std::string> KeplerModel::refusal(const NodeFacts& node) const {
    const auto& names = predictor_->features();
    for (size_t i = 0; i < columns_.size(); ++i) {
        if (!columns_[i]) return fmt::format("needs Kepler feature {}, which no keplershm frame carries", names[i]);
        const uint64_t bit = feature_metric(*columns_[i]);
        if (bit != 0 && (node.metric_mask & bit) == 0) {
            return fmt::format("needs {} but the node lacks metric {}", names[i], metric_bit_name(bit));
        }
    }
    return std::nullopt;
}

std::optional<std::vector<double>> KeplerModel::kepler_row(const NodeFeatures& features) const {
    std::vector<double> row;
    for (const std::optional<Feature>& column : columns_) {
        if (!column || !features[*column]) return std::nullopt;
        row.push_back(*features[*column] * kKeplerIntervalS);
    }
    return row;
}

std::optional<NodeEnergy> KeplerModel::estimate(const FrameInput& in) {
    const std::optional<std::vector<double>> row = kepler_row(in.features);
    if (!row) return std::nullopt;
    const std::vector<double> watts = predictor_->predict(*row);
    const std::vector<ZoneKind>& zones = predictor_->zones();
    if (!predictor_->dynamic() && !idle_) idle_ = predictor_->predict(std::vector<double>(row->size(), 0.0));
    NodeEnergy out;
    out.source = name_;
    for (size_t i = 0; i < zones.size(); ++i) {
        const double model_w = std::max(0.0, watts[i]);  // clamped at 0 W (MODELS.md)
        // DynPower has no idle figure in Kepler's DB: the curve's idle watts per CPU for the package,
        // as our own dynamic models do; AbsPower: the model's prediction for a node at rest.
        const double idle_w = predictor_->dynamic() ? (zones[i] == ZoneKind::package ? in.node.cpu_count * CurveParams{}.idle_w : 0.0)
                                                    : std::max(0.0, (*idle_)[i]);
        const double total_w = predictor_->dynamic() ? model_w + idle_w : model_w;
        ZoneEnergy zone{ZoneKey{zones[i], kWholeNode}, watts_to_uj(total_w, in.features.interval_s), 0, {}};
        zone.idle_uj = std::min(zone.total_uj, watts_to_uj(idle_w, in.features.interval_s));
        out.zones.push_back(zone);
    }
    return out;
}

}  // namespace kepler::estimate
