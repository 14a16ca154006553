// `--model NAME=SPEC` values: which node models to run side by side.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "load/kepler_model_db.hpp"
#include "model/node_model.hpp"

namespace kepler::estimate {

/// A model's name: 1 to kMaxModelName characters of [A-Za-z0-9_.-].
inline constexpr size_t kMaxModelName = 64;

/// One configured model. Plain value.
struct ModelSpec {
    enum class Kind { measured, curve, xgboost, external, kepler, kepler_db };
    std::string name;
    Kind kind = Kind::curve;
    CurveParams curve;               // Kind::curve
    std::filesystem::path path;      // Kind::xgboost: model directory or metadata file; Kind::kepler: the file
    std::string source;              // Kind::external: estimates segment name or recording path
    KeplerDbParams kepler_db;        // Kind::kepler_db
    std::string sha256;              // Kind::xgboost (of model.json) and Kind::kepler (of the file): pinned, lower-case hex
};

/// Parses `NAME=SPEC` with SPEC one of `measured`, `curve[:idle_w=W,max_w=W]`, `xgboost:PATH[,sha256=HEX]`,
/// `external:SEGMENT` (an estimates segment, or a recording of one), `kepler:FILE[,sha256=HEX]` (a Kepler
/// 0.7 weights JSON or XGBoost zip), `kepler-db:DIR[,options]` (a Kepler model DB folder, see KeplerDbParams).
/// A `sha256` pins the file's bytes (for xgboost, model.json's, whose targets may pin each booster).
/// Throws std::invalid_argument with a message that quotes the bad part.
[[nodiscard]] ModelSpec parse_model_spec(std::string_view text);
[[nodiscard]] std::string_view to_string(ModelSpec::Kind kind) noexcept;
/// The configured specs plus the built-ins every node needs: `measured` and `curve` (so a VM always
/// gets an answer) unless a model of that kind is configured already.
[[nodiscard]] std::vector<ModelSpec> with_builtin_models(std::vector<ModelSpec> specs);
/// Parses --gpu-idle-watts: "W" (every GPU) or "INDEX=W,INDEX=W" (a GPU by its device index), watts in
/// [0, 10000]. Throws std::invalid_argument quoting the bad part.
[[nodiscard]] GpuIdleWatts parse_gpu_idle_watts(std::string_view text);

}  // namespace kepler::estimate
