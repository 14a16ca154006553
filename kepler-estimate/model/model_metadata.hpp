// The model directory format of MODELS.md: metadata (model.json) plus one XGBoost booster per zone.
// Model files are untrusted input: every field is checked and errors name the file and the field.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/zones.hpp"

namespace kepler::estimate {

/// A model file that cannot be used, with a message naming the file and the field at fault.
class ModelError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// One booster: the zone it predicts and its file, inside the model directory. Plain value.
struct ModelTarget {
    ZoneKind zone = ZoneKind::package;
    std::filesystem::path file;
    std::string sha256;  // optional "sha256" (lower-case hex): the booster is refused unless its bytes match
};

/// The values of one feature over the rows a model was trained on (model.json's "training_range").
struct FeatureRange {
    double lowest = 0;
    double highest = 0;
    /// How far `value` lies outside the range: negative below it, 0 inside it.
    [[nodiscard]] double excess(double value) const noexcept {
        return value > highest ? value - highest : value < lowest ? value - lowest : 0.0;
    }
};

/// Parsed, validated model.json. Plain value.
struct ModelMetadata {
    std::string name;
    std::string version;
    bool dynamic_output = false;            // "output": "dynamic" (power above idle)
    std::vector<std::string> features;      // booster column order; names may be unknown here
    std::vector<ModelTarget> targets;
    std::map<ZoneKind, double> idle_w;      // optional "idle_w" per zone
    std::map<ZoneKind, double> expected_error_w;  // optional: MAE on held-out time blocks, per zone
    std::string cpu_model;
    uint32_t cpu_count = 0;
    /// Parallel to `features`; nullopt where the metadata gives no range (then the feature never counts
    /// as extrapolating).
    std::vector<std::optional<FeatureRange>> training_range;
    /// Per zone, watts per feature unit beyond the training range, parallel to `features` (0: no slope).
    /// Absent zones: the trees alone (flat beyond the range).
    std::map<ZoneKind, std::vector<double>> extrapolation_slopes;
};

/// Where the metadata of a model spec path lives: `<dir>/model.json` for a directory, else the path.
[[nodiscard]] std::filesystem::path metadata_path(const std::filesystem::path& spec_path);
/// Reads and validates the metadata at `path` (targets resolved against its directory); refuses it unless
/// its bytes hash to `expected_sha256` when that is set (`xgboost:PATH,sha256=HEX`).
[[nodiscard]] ModelMetadata load_model_metadata(const std::filesystem::path& path, std::string_view expected_sha256 = {});
/// Parses metadata text; `directory` resolves target files. Throws ModelError.
[[nodiscard]] ModelMetadata parse_model_metadata(const std::string& text, const std::filesystem::path& directory,
                                                 const std::string& origin);
/// Size and modification time of the metadata and every booster it names; empty when the metadata
/// is missing. A different fingerprint means "reload".
[[nodiscard]] std::string model_fingerprint(const std::filesystem::path& spec_path);
/// Throws ModelError naming `origin` when `expected_sha256` (64 hex digits) is set and `bytes` hash to
/// something else; does nothing when it is empty.
void check_sha256(std::string_view bytes, std::string_view expected_sha256, const std::string& origin);
/// Reads a whole file of at most `limit` bytes. Throws ModelError.
[[nodiscard]] std::string read_small_file(const std::filesystem::path& path, uintmax_t limit);

}  // namespace kepler::estimate
