// Kepler 0.7's linear weights, evaluated exactly as its Go exporter does
// (pkg/model/estimator/local/regressor: linear.go, model_weights.go):
//   power = Bias_Weight + Σ_categorical weight + Σ_numerical (weight ≠ 0) weight × value / scale,
// where a scale of 0 contributes nothing and a feature absent from a zone's weights counts as weight 0.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "model/json_object.hpp"
#include "model/kepler/kepler_predictor.hpp"
#include "model/model_metadata.hpp"

namespace kepler::estimate {

namespace {

using nlohmann::json;

constexpr size_t kMaxFeatures = 64;
constexpr size_t kMaxTextBytes = 1u << 20;

struct Term {
    double weight = 0;
    double scale = 0;
};

struct ZoneWeights {
    double bias = 0;
    std::vector<Term> terms;  // parallel to the predictor's features
};

double finite_number(const json& v, const std::string& what, const std::string& origin) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) throw ModelError(fmt::format("{}: {} is not a finite number", origin, what));
    return v.get<double>();
}

const json& weights_of(const json& zone, const std::string& name, const std::string& origin) {
    auto all = zone.find("All_Weights");
    if (!zone.is_object() || all == zone.end() || !all->is_object()) {
        throw ModelError(fmt::format("{}: zone {} has no All_Weights object", origin, name));
    }
    if (all->contains("CurveFit_Weights")) {
        throw ModelError(fmt::format("{}: zone {} is a curve-fit model, not linear weights", origin, name));
    }
    return *all;
}

class WeightsPredictor final : public KeplerPredictor {
public:
    WeightsPredictor(const json& doc, bool dynamic, const std::string& origin) : dynamic_(dynamic) {
        std::set<std::string> names;
        std::vector<const json*> bodies;  // each zone's All_Weights, parallel to zones_ (the key may be an alias: psys)
        for (const auto& [zone, body] : doc.items()) {
            const std::optional<ZoneKind> kind = zone_kind_from_name(zone);
            if (!kind) continue;  // model_name, machine_spec and other bookkeeping keys
            if (std::find(zones_.begin(), zones_.end(), *kind) != zones_.end()) {
                throw ModelError(fmt::format("{}: zone {} has two sets of weights (psys and platform are one zone)", origin, zone_name(*kind)));
            }
            const json& all = weights_of(body, zone, origin);
            auto numerical = all.find("Numerical_Variables");
            if (numerical == all.end() || !numerical->is_object()) throw ModelError(fmt::format("{}: zone {} has no Numerical_Variables", origin, zone));
            for (const auto& [feature, term] : numerical->items()) names.insert(feature);
            zones_.push_back(*kind);
            bodies.push_back(&all);
        }
        if (zones_.empty()) throw ModelError(fmt::format("{}: no zone (package, core, uncore, dram, platform) in the weights", origin));
        if (names.empty() || names.size() > kMaxFeatures) throw ModelError(fmt::format("{}: {} features (1 to {})", origin, names.size(), kMaxFeatures));
        features_.assign(names.begin(), names.end());
        for (const json* all : bodies) weights_.push_back(parse_zone(*all, origin));
    }

    const std::vector<std::string>& features() const noexcept override { return features_; }
    const std::vector<ZoneKind>& zones() const noexcept override { return zones_; }
    bool dynamic() const noexcept override { return dynamic_; }

    std::vector<double> predict(const std::vector<double>& row) override {
        std::vector<double> out;
        for (const ZoneWeights& z : weights_) {
            double power = z.bias;
            for (size_t i = 0; i < z.terms.size(); ++i) {
                const Term& t = z.terms[i];
                if (t.weight == 0 || t.scale == 0) continue;  // as Go: skipped terms, not 0 × inf
                power += t.weight * (row.at(i) / t.scale);
            }
            out.push_back(power);
        }
        return out;
    }

private:
    ZoneWeights parse_zone(const json& all, const std::string& origin) {
        ZoneWeights z;
        if (auto bias = all.find("Bias_Weight"); bias != all.end()) z.bias = finite_number(*bias, "Bias_Weight", origin);
        // Categorical variables take node facts Kepler 0.7 fills from its own config; the published
        // models have none, and we refuse rather than guess a category.
        if (auto cat = all.find("Categorical_Variables"); cat != all.end() && !(cat->is_object() && cat->empty())) {
            throw ModelError(fmt::format("{}: categorical variables are not supported", origin));
        }
        const json& numerical = all.at("Numerical_Variables");
        for (const std::string& f : features_) {
            Term t;
            if (auto it = numerical.find(f); it != numerical.end()) {
                if (!it->is_object()) throw ModelError(fmt::format("{}: weight of {} is not an object", origin, f));
                if (auto s = it->find("scale"); s != it->end()) t.scale = finite_number(*s, f + ".scale", origin);
                if (auto w = it->find("weight"); w != it->end()) t.weight = finite_number(*w, f + ".weight", origin);
            }
            z.terms.push_back(t);
        }
        return z;
    }

    bool dynamic_;
    std::vector<std::string> features_;
    std::vector<ZoneKind> zones_;
    std::vector<ZoneWeights> weights_;
};

}  // namespace

std::unique_ptr<KeplerPredictor> parse_kepler_weights(const std::string& text, bool dynamic, const std::string& origin) {
    if (text.size() > kMaxTextBytes) throw ModelError(fmt::format("{}: {} bytes is too large for weights", origin, text.size()));
    return std::make_unique<WeightsPredictor>(parse_json_object(text, origin), dynamic, origin);
}

std::unique_ptr<KeplerPredictor> load_kepler_model(const std::filesystem::path& path, int threads) {
    const std::string ext = path.extension().string();
    if (ext == ".zip") return load_kepler_xgboost_zip(path, threads);
    if (ext != ".json") throw ModelError(fmt::format("{}: a Kepler model is a weights .json or an XGBoost .zip", path.string()));
    // Kepler keeps the output type in the DB folder name (.../DynPower/<group>/...), not in the file.
    bool dynamic = false;
    for (const auto& part : path) dynamic = dynamic || part == "DynPower";
    return parse_kepler_weights(read_small_file(path, kMaxTextBytes), dynamic, path.string());
}

}  // namespace kepler::estimate
