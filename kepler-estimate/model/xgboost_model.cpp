#include "model/xgboost_model.hpp"

#include <fmt/format.h>
#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>

namespace kepler_estimate {

namespace fs = std::filesystem;

namespace {
constexpr uintmax_t kMaxBoosterBytes = 256u << 20;
}

/// RAII over a BoosterHandle. Not thread-safe.
class Booster {
public:
    Booster(const fs::path& file, int threads, size_t expected_features) {
        std::error_code ec;
        const uintmax_t size = fs::file_size(file, ec);
        if (ec) throw ModelError(fmt::format("{}: {}", file.string(), ec.message()));
        if (size > kMaxBoosterBytes) throw ModelError(fmt::format("{}: {} bytes is too large for a booster", file.string(), size));
        if (XGBoosterCreate(nullptr, 0, &handle_) != 0) throw ModelError(fmt::format("XGBoosterCreate: {}", XGBGetLastError()));
        if (XGBoosterLoadModel(handle_, file.c_str()) != 0) {
            const std::string why = XGBGetLastError();
            XGBoosterFree(handle_);
            throw ModelError(fmt::format("{}: not an XGBoost model ({})", file.string(), first_line(why)));
        }
        const std::string nthread = std::to_string(std::max(1, threads));
        bst_ulong features = 0;
        if (XGBoosterSetParam(handle_, "nthread", nthread.c_str()) != 0 || XGBoosterGetNumFeature(handle_, &features) != 0) {
            const std::string why = XGBGetLastError();
            XGBoosterFree(handle_);
            throw ModelError(fmt::format("{}: {}", file.string(), first_line(why)));
        }
        if (features != expected_features) {
            XGBoosterFree(handle_);
            throw ModelError(fmt::format("{}: booster takes {} features, metadata lists {}", file.string(), features,
                                         expected_features));
        }
    }
    ~Booster() { XGBoosterFree(handle_); }
    Booster(const Booster&) = delete;
    Booster& operator=(const Booster&) = delete;

    double predict(const std::vector<float>& row) {
        // "cache_id": 0 is required by 1.7's PredictFromDense (else "Invalid cast, from Null to Integer").
        static constexpr const char* kConfig =
            R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false, "cache_id": 0, "missing": NaN})";
        const std::string array = fmt::format(R"({{"data": [{}, true], "shape": [1, {}], "typestr": "<f4", "version": 3}})",
                                              reinterpret_cast<uintptr_t>(row.data()), row.size());
        const bst_ulong* shape = nullptr;
        bst_ulong dims = 0;
        const float* result = nullptr;
        if (XGBoosterPredictFromDense(handle_, array.c_str(), kConfig, nullptr, &shape, &dims, &result) != 0) {
            throw ModelError(fmt::format("XGBoost prediction failed: {}", first_line(XGBGetLastError())));
        }
        if (result == nullptr || dims == 0 || shape == nullptr || shape[0] < 1) throw ModelError("XGBoost returned no prediction");
        return static_cast<double>(result[0]);
    }

private:
    static std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }
    BoosterHandle handle_ = nullptr;
};

XgboostModel::XgboostModel(std::string name, const fs::path& spec_path, int threads) : name_(std::move(name)) {
    meta_ = load_model_metadata(metadata_path(spec_path));
    for (const std::string& feature : meta_.features) columns_.push_back(feature_from_name(feature));
    for (const ModelTarget& target : meta_.targets) {
        boosters_.push_back(std::make_unique<Booster>(target.file, threads, meta_.features.size()));
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
    return predict_row(row);
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
        ZoneEnergy zone{ZoneKey{meta_.targets[i].zone, kWholeNode}, watts_to_uj(total_w, dt), 0};
        zone.idle_uj = std::min(zone.total_uj, watts_to_uj(idle[i], dt));
        out.zones.push_back(zone);
    }
    return out;
}

}  // namespace kepler_estimate
