// The two formats of Kepler 0.7's model DB behind one interface: linear weights (SGDRegressorTrainer_N.json,
// what Kepler's Go exporter evaluates in process) and XGBoost zips (XgboostFitTrainer_N.zip, what
// Kepler's Python estimator sidecar runs). Both take one row of Kepler-named feature values.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/zones.hpp"

namespace kepler::estimate {

/// One loaded Kepler model. Not thread-safe (XGBoost boosters are used from one thread).
class KeplerPredictor {
public:
    virtual ~KeplerPredictor() = default;
    /// Kepler 0.7 feature names, in the order predict() takes them.
    [[nodiscard]] virtual const std::vector<std::string>& features() const noexcept = 0;
    /// The zones predict() answers, in its output order.
    [[nodiscard]] virtual const std::vector<ZoneKind>& zones() const noexcept = 0;
    /// Watts per zone for one row of per-interval feature values (Kepler's units).
    [[nodiscard]] virtual std::vector<double> predict(const std::vector<double>& row) = 0;
    /// True for DynPower models (power above idle), false for AbsPower.
    [[nodiscard]] virtual bool dynamic() const noexcept = 0;
};

/// Parses a weights JSON (`{zone: {"All_Weights": {...}}}`); `dynamic` comes from the DB path
/// (Kepler keeps it in the folder name, not in the file). Throws ModelError.
[[nodiscard]] std::unique_ptr<KeplerPredictor> parse_kepler_weights(const std::string& text, bool dynamic,
                                                                    const std::string& origin);
/// Loads an XGBoost zip: metadata.json, the per-zone boosters and the scaler. Throws ModelError.
[[nodiscard]] std::unique_ptr<KeplerPredictor> load_kepler_xgboost_zip(const std::filesystem::path& path, int threads);
/// Either format, chosen by the file name's extension (.json or .zip). Throws ModelError.
[[nodiscard]] std::unique_ptr<KeplerPredictor> load_kepler_model(const std::filesystem::path& path, int threads);

}  // namespace kepler::estimate
