#include "load/model_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "load/key_value_list.hpp"
#include "support/digest/sha256.hpp"

namespace kepler::estimate {

namespace {

bool valid_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxModelName) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    });
}

double parse_watts(std::string_view key, std::string_view value, std::string_view what = "curve parameter") {
    double out = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
    if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(out) || out < 0 || out > 1e4) {
        throw std::invalid_argument(fmt::format("{} {}=\"{}\" is not a number of watts in [0, 10000]", what, key, value));
    }
    return out;
}

CurveParams parse_curve(std::string_view args) {
    CurveParams p;
    for (const auto& [key, value] : split_key_value_list(args, "curve parameter")) {
        if (key == "idle_w") p.idle_w = parse_watts(key, value);
        else if (key == "max_w") p.max_w = parse_watts(key, value);
        else throw std::invalid_argument(fmt::format("unknown curve parameter \"{}\" (idle_w, max_w)", key));
    }
    if (p.max_w < p.idle_w) throw std::invalid_argument(fmt::format("curve max_w {} is below idle_w {}", p.max_w, p.idle_w));
    return p;
}

/// Splits a trailing ",sha256=HEX" off a file argument into `spec.sha256` (lower case); returns the path.
std::string_view take_digest(std::string_view args, ModelSpec& spec) {
    constexpr std::string_view kKey = ",sha256=";
    const size_t at = args.rfind(kKey);
    if (at == std::string_view::npos) return args;
    const std::string_view digest = args.substr(at + kKey.size());
    if (!kepler::support::is_sha256_hex(digest)) {
        throw std::invalid_argument(fmt::format("sha256=\"{}\" is not 64 hex digits", digest));
    }
    spec.sha256.assign(digest);
    std::transform(spec.sha256.begin(), spec.sha256.end(), spec.sha256.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return args.substr(0, at);
}

std::filesystem::path file_argument(std::string_view args, ModelSpec& spec) {
    const std::string_view path = take_digest(args, spec);
    if (path.empty()) throw std::invalid_argument(fmt::format("model spec \"{}\" names no file", args));
    return std::filesystem::path(std::string(path));
}

}  // namespace

std::string_view to_string(ModelSpec::Kind kind) noexcept {
    switch (kind) {
        case ModelSpec::Kind::measured: return "measured";
        case ModelSpec::Kind::curve: return "curve";
        case ModelSpec::Kind::xgboost: return "xgboost";
        case ModelSpec::Kind::external: return "external";
        case ModelSpec::Kind::kepler: return "kepler";
        case ModelSpec::Kind::kepler_db: return "kepler-db";
    }
    return "?";
}

ModelSpec parse_model_spec(std::string_view text) {
    const size_t eq = text.find('=');
    if (eq == std::string_view::npos) throw std::invalid_argument(fmt::format("model \"{}\" is not NAME=SPEC", text));
    ModelSpec spec;
    spec.name = std::string(text.substr(0, eq));
    if (!valid_name(spec.name)) {
        throw std::invalid_argument(fmt::format("model name \"{}\" must be 1-{} of [A-Za-z0-9_.-]", spec.name, kMaxModelName));
    }
    const std::string_view body = text.substr(eq + 1);
    const size_t colon = body.find(':');
    const std::string_view kind = body.substr(0, colon);
    const std::string_view args = colon == std::string_view::npos ? std::string_view() : body.substr(colon + 1);
    if (kind == "measured" && colon == std::string_view::npos) {
        spec.kind = ModelSpec::Kind::measured;
    } else if (kind == "curve") {
        spec.kind = ModelSpec::Kind::curve;
        spec.curve = parse_curve(args);
    } else if (kind == "xgboost" && !args.empty()) {
        spec.kind = ModelSpec::Kind::xgboost;
        spec.path = file_argument(args, spec);
    } else if (kind == "external" && !args.empty()) {
        spec.kind = ModelSpec::Kind::external;
        spec.source = std::string(args);
    } else if (kind == "kepler" && !args.empty()) {
        spec.kind = ModelSpec::Kind::kepler;
        spec.path = file_argument(args, spec);
    } else if (kind == "kepler-db" && !args.empty()) {
        spec.kind = ModelSpec::Kind::kepler_db;
        if (args.find("sha256=") != std::string_view::npos) {
            throw std::invalid_argument("kepler-db chooses its model file at run time, so no digest can be pinned; "
                                        "name the file with kepler:FILE,sha256=HEX instead");
        }
        spec.kepler_db = parse_kepler_db_params(args);
    } else {
        throw std::invalid_argument(fmt::format(
            "model spec \"{}\" is not one of measured, curve[:idle_w=W,max_w=W], xgboost:PATH[,sha256=HEX], external:SEGMENT, kepler:FILE[,sha256=HEX], "
            "kepler-db:DIR[,options]",
            body));
    }
    return spec;
}

std::vector<ModelSpec> with_builtin_models(std::vector<ModelSpec> specs) {
    auto has = [&](ModelSpec::Kind kind, std::string_view name) {
        return std::any_of(specs.begin(), specs.end(), [&](const ModelSpec& s) { return s.kind == kind || s.name == name; });
    };
    if (!has(ModelSpec::Kind::measured, "measured")) specs.insert(specs.begin(), ModelSpec{"measured", ModelSpec::Kind::measured, {}, {}, {}, {}, {}});
    if (!has(ModelSpec::Kind::curve, "curve")) specs.push_back(ModelSpec{"curve", ModelSpec::Kind::curve, {}, {}, {}, {}, {}});
    return specs;
}

GpuIdleWatts parse_gpu_idle_watts(std::string_view text) {
    GpuIdleWatts idle;
    if (text.find('=') == std::string_view::npos) {
        idle.every = parse_watts("every GPU", text, "--gpu-idle-watts");
        return idle;
    }
    for (const auto& [key, value] : split_key_value_list(text, "--gpu-idle-watts item")) {
        uint32_t index = 0;
        const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
        if (ec != std::errc() || end != key.data() + key.size()) {
            throw std::invalid_argument(fmt::format("--gpu-idle-watts: \"{}\" is not a GPU index", key));
        }
        idle.by_index[index] = parse_watts(key, value, "--gpu-idle-watts");
    }
    return idle;
}

}  // namespace kepler::estimate
