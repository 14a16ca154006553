#include "model/xgboost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/xgboost_booster.hpp"

namespace kepler::estimate {

namespace fs = std::filesystem;

XgboostModel::XgboostModel(std::string name, const fs::path& spec_path, int threads, std::string_view metadata_sha256)
    : name_(std::move(name)) {
    meta_ = load_model_metadata(metadata_path(spec_path), metadata_sha256);
    for (const std::string& feature : meta_.features) columns_.push_back(feature_from_name(feature));
    for (const ModelTarget& target : meta_.targets) {
        if (target.sha256.empty()) {
            boosters_.push_back(std::make_unique<XgboostBooster>(target.file, threads, meta_.features.size()));
            continue;
        }
        // Pinned: the bytes checked are the bytes loaded (no second read a writer could slip into).
        const std::string bytes = read_small_file(target.file, kMaxBoosterBytes);
        check_sha256(bytes, target.sha256, target.file.string());
        boosters_.push_back(std::make_unique<XgboostBooster>(bytes, target.file.string(), threads, meta_.features.size()));
    }
}

XgboostModel::~XgboostModel() = default;

std::optional<std::string> XgboostModel::refusal(const NodeFacts& node) const {
    for (size_t i = 0; i < columns_.size(); ++i) {
        if (!columns_[i]) return fmt::format("needs feature {}, which no keplershm node produces", meta_.features[i]);
        const uint64_t bit = feature_metric(*columns_[i]);
        if (bit != 0 && (node.metric_mask & bit) == 0) {
            return fmt::format("needs {} but the node lacks metric {}", meta_.features[i], metric_bit_name(bit));
        }
    }
    return std::nullopt;
}

CpuMatch XgboostModel::cpu_match(const NodeFacts& node) const { return match_cpu(meta_.cpu_model, node.cpu_model); }

std::vector<double> XgboostModel::predict_row(const std::vector<float>& row) {
    std::vector<double> watts;
    watts.reserve(boosters_.size());
    for (auto& booster : boosters_) watts.push_back(booster->predict(row));
    return watts;
}

std::optional<std::vector<double>> XgboostModel::predict_watts(const NodeFeatures& features) {
    std::vector<float> row;
    row.reserve(columns_.size());
    for (const std::optional<Feature>& column : columns_) {
        if (!column || !features[*column]) return std::nullopt;
        row.push_back(static_cast<float>(*features[*column]));
    }
    std::vector<double> watts = predict_row(row);
    // Trees are flat beyond the values they were trained on; the slopes carry the prediction on
    // (MODELS.md, "Extrapolation"). Computed from the row as the boosters saw it (float).
    excess_.assign(row.size(), 0.0);
    for (size_t f = 0; f < row.size(); ++f) {
        if (meta_.training_range[f]) excess_[f] = meta_.training_range[f]->excess(row[f]);
    }
    estimated_ = true;
    for (size_t i = 0; i < meta_.targets.size(); ++i) {
        const auto slopes = meta_.extrapolation_slopes.find(meta_.targets[i].zone);
        if (slopes == meta_.extrapolation_slopes.end()) continue;
        for (size_t f = 0; f < row.size(); ++f) watts[i] += slopes->second[f] * excess_[f];
    }
    return watts;
}

std::map<std::string, bool> XgboostModel::outside_training_range() const {
    std::map<std::string, bool> out;
    if (!estimated_) return out;
    for (size_t f = 0; f < meta_.features.size(); ++f) {
        if (meta_.training_range[f]) out[meta_.features[f]] = excess_[f] != 0.0;
    }
    return out;
}

std::vector<double> XgboostModel::idle_watts(const NodeFacts& node) {
    if (idle_cpu_count_ == node.cpu_count) return idle_cache_;
    std::vector<double> idle(meta_.targets.size(), 0.0);
    // Absolute models without an idle figure: the prediction for a node doing nothing (MODELS.md).
    std::vector<float> quiet;
    for (const std::optional<Feature>& column : columns_) {
        quiet.push_back(column == Feature::cpu_count ? static_cast<float>(node.cpu_count) : 0.0f);
    }
    std::optional<std::vector<double>> at_rest;
    for (size_t i = 0; i < meta_.targets.size(); ++i) {
        const ZoneKind zone = meta_.targets[i].zone;
        if (auto it = meta_.idle_w.find(zone); it != meta_.idle_w.end()) {
            idle[i] = it->second;
        } else if (meta_.dynamic_output) {
            idle[i] = zone == ZoneKind::package ? node.cpu_count * CurveParams{}.idle_w : 0.0;
        } else {
            if (!at_rest) at_rest = predict_row(quiet);
            idle[i] = std::max(0.0, (*at_rest)[i]);
        }
    }
    idle_cpu_count_ = node.cpu_count;
    idle_cache_ = idle;
    return idle;
}

std::optional<NodeEnergy> XgboostModel::estimate(const FrameInput& in) {
    const std::optional<std::vector<double>> predicted = predict_watts(in.features);
    if (!predicted) return std::nullopt;
    const std::vector<double> idle = idle_watts(in.node);
    const double dt = in.features.interval_s;
    NodeEnergy out;
    out.source = name_;
    for (size_t i = 0; i < meta_.targets.size(); ++i) {
        const double model_w = std::max(0.0, (*predicted)[i]);  // clamped at 0 W (MODELS.md)
        const double total_w = meta_.dynamic_output ? model_w + idle[i] : model_w;
        ZoneEnergy zone{ZoneKey{meta_.targets[i].zone, kWholeNode}, watts_to_uj(total_w, dt), 0, {}};
        zone.idle_uj = std::min(zone.total_uj, watts_to_uj(idle[i], dt));
        out.zones.push_back(zone);
    }
    return out;
}

}  // namespace kepler::estimate
