// Kepler's XgboostFitTrainer_N.zip, evaluated as Kepler's Python estimator does: the row is divided by
// the MaxAbsScaler's scale_ (scaler.pkl, read by our restricted unpickler), then each zone's booster
// (<zone>.json, listed in metadata.json's per-zone "model_file" via <model_name>.json) predicts watts.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/json_object.hpp"
#include "model/kepler/kepler_predictor.hpp"
#include "model/kepler/kepler_zip.hpp"
#include "model/model_metadata.hpp"
#include "model/kepler/pickle_scaler.hpp"
#include "model/xgboost_booster.hpp"

namespace kepler::estimate {

namespace {

using nlohmann::json;

const std::string& entry(const std::map<std::string, std::string>& entries, const std::string& name, const std::string& origin) {
    auto it = entries.find(name);
    if (it == entries.end()) throw ModelError(fmt::format("{}: the archive has no {}", origin, name));
    return it->second;
}

std::vector<std::string> string_list(const json& doc, const char* field, const std::string& origin) {
    auto it = doc.find(field);
    if (it == doc.end() || !it->is_array() || it->empty() || it->size() > 64) throw ModelError(fmt::format("{}: \"{}\" is not a list of 1 to 64 names", origin, field));
    std::vector<std::string> out;
    for (const json& v : *it) {
        if (!v.is_string()) throw ModelError(fmt::format("{}: \"{}\" holds a non-string", origin, field));
        out.push_back(v.get<std::string>());
    }
    return out;
}

/// An optional name field: "" when absent, ModelError when it is there but not a string (json::value
/// would throw its own type_error).
std::string optional_text(const json& doc, const char* field, const std::string& origin) {
    auto it = doc.find(field);
    if (it == doc.end()) return {};
    if (!it->is_string()) throw ModelError(fmt::format("{}: \"{}\" is not a string", origin, field));
    return it->get<std::string>();
}

class XgboostZipPredictor final : public KeplerPredictor {
public:
    XgboostZipPredictor(const std::filesystem::path& path, int threads) {
        const std::string origin = path.string();
        const auto entries = read_zip_entries(path);
        const json meta = parse_json_object(entry(entries, "metadata.json", origin), origin + ":metadata.json");
        features_ = string_list(meta, "features", origin + ":metadata.json");
        const std::string output = optional_text(meta, "output_type", origin + ":metadata.json");
        if (output != "AbsPower" && output != "DynPower") throw ModelError(fmt::format("{}: output_type \"{}\"", origin, output));
        dynamic_ = output == "DynPower";
        const std::string model_file = optional_text(meta, "model_file", origin + ":metadata.json");
        const json zones = parse_json_object(entry(entries, model_file, origin), origin + ":" + model_file);
        for (const auto& [zone, body] : zones.items()) load_zone(entries, zone, body, threads, origin);
        if (zones_.empty()) throw ModelError(fmt::format("{}: no zone models", origin));
        scaler_ = parse_max_abs_scaler(entry(entries, "scaler.pkl", origin));
        if (scaler_.scale.size() != features_.size()) {
            throw ModelError(fmt::format("{}: scaler has {} features, metadata {}", origin, scaler_.scale.size(), features_.size()));
        }
    }

    const std::vector<std::string>& features() const noexcept override { return features_; }
    const std::vector<ZoneKind>& zones() const noexcept override { return zones_; }
    bool dynamic() const noexcept override { return dynamic_; }

    std::vector<double> predict(const std::vector<double>& row) override {
        // Scaled in double as sklearn does, then float32 as xgboost's DMatrix stores it.
        std::vector<float> scaled(row.size());
        for (size_t i = 0; i < row.size(); ++i) scaled[i] = static_cast<float>(row[i] / scaler_.scale[i]);
        std::vector<double> out;
        for (auto& booster : boosters_) out.push_back(booster->predict(scaled));
        return out;
    }

private:
    void load_zone(const std::map<std::string, std::string>& entries, const std::string& zone, const json& body, int threads,
                   const std::string& origin) {
        const std::optional<ZoneKind> kind = zone_kind_from_name(zone);
        if (!kind || !body.is_object()) throw ModelError(fmt::format("{}: unknown zone \"{}\"", origin, zone));
        if (std::find(zones_.begin(), zones_.end(), *kind) != zones_.end()) {
            throw ModelError(fmt::format("{}: zone {} has two boosters (psys and platform are one zone)", origin, zone_name(*kind)));
        }
        if (string_list(body, "features", origin) != features_) throw ModelError(fmt::format("{}: zone {} lists other features", origin, zone));
        if (auto fe = body.find("fe_files"); fe != body.end() && fe->is_array()) {
            for (const json& f : *fe) {
                if (f != "scaler.pkl") throw ModelError(fmt::format("{}: feature engineering file {} is not supported", origin, f.dump()));
            }
        }
        const std::string file = optional_text(body, "model_file", origin + ": zone " + zone);
        boosters_.push_back(std::make_unique<XgboostBooster>(entry(entries, file, origin), origin + ":" + file, threads, features_.size()));
        zones_.push_back(*kind);
    }

    bool dynamic_ = false;
    std::vector<std::string> features_;
    std::vector<ZoneKind> zones_;
    std::vector<std::unique_ptr<XgboostBooster>> boosters_;  // parallel to zones_
    MaxAbsScaler scaler_;
};

}  // namespace

std::unique_ptr<KeplerPredictor> load_kepler_xgboost_zip(const std::filesystem::path& path, int threads) {
    return std::make_unique<XgboostZipPredictor>(path, threads);
}

}  // namespace kepler::estimate
