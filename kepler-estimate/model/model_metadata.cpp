#include "model/model_metadata.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/json_object.hpp"
#include "support/digest/sha256.hpp"

namespace kepler::estimate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uintmax_t kMaxMetadataBytes = 1u << 20;
constexpr size_t kMaxFeatures = 256;
constexpr size_t kMaxTargets = 16;

const json& require(const json& object, const char* field, json::value_t type, const std::string& origin) {
    auto it = object.find(field);
    if (it == object.end()) throw ModelError(fmt::format("{}: missing field \"{}\"", origin, field));
    const bool ok = it->type() == type || (type == json::value_t::number_float && it->is_number());
    if (!ok) throw ModelError(fmt::format("{}: field \"{}\" has type {}", origin, field, it->type_name()));
    return *it;
}

std::string optional_string(const json& object, const char* field) {
    auto it = object.find(field);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// A target's optional "sha256": 64 hex digits, kept in lower case.
std::string target_digest(const json& target, const std::string& origin) {
    const auto it = target.find("sha256");
    if (it == target.end()) return {};
    if (!it->is_string() || !kepler::support::is_sha256_hex(it->get_ref<const std::string&>())) {
        throw ModelError(fmt::format("{}: a target's \"sha256\" is not 64 hex digits", origin));
    }
    std::string digest = it->get<std::string>();
    std::transform(digest.begin(), digest.end(), digest.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return digest;
}

/// A target file must stay inside the model directory: no absolute paths, no "..".
fs::path safe_relative(const std::string& file, const std::string& origin) {
    const fs::path p(file);
    if (file.empty() || p.is_absolute()) throw ModelError(fmt::format("{}: target file \"{}\" must be a relative name", origin, file));
    for (const fs::path& part : p) {
        if (part == "..") throw ModelError(fmt::format("{}: target file \"{}\" leaves the model directory", origin, file));
    }
    return p;
}

// An optional {"zone": watts >= 0} object of the metadata (idle_w, expected_error_w).
std::map<ZoneKind, double> zone_watts(const nlohmann::json& doc, const char* key, const std::string& origin) {
    std::map<ZoneKind, double> out;
    const auto it = doc.find(key);
    if (it == doc.end()) return out;
    if (!it->is_object()) throw ModelError(fmt::format("{}: {} is not an object", origin, key));
    for (const auto& [zone, watts] : it->items()) {
        const std::optional<ZoneKind> kind = zone_kind_from_name(zone);
        if (!kind || !watts.is_number() || !std::isfinite(watts.get<double>()) || watts.get<double>() < 0) {
            throw ModelError(fmt::format("{}: {}[\"{}\"] must be a known zone with watts >= 0", origin, key, zone));
        }
        out[*kind] = watts.get<double>();
    }
    return out;
}

size_t feature_index(const ModelMetadata& m, const std::string& name, const char* key, const std::string& origin) {
    const auto it = std::find(m.features.begin(), m.features.end(), name);
    if (it == m.features.end()) throw ModelError(fmt::format("{}: {} names \"{}\", which is not among the features", origin, key, name));
    return static_cast<size_t>(it - m.features.begin());
}

// The optional "training_range": {"feature": [lowest, highest]} with finite bounds, lowest <= highest.
void read_training_range(const json& doc, ModelMetadata& m, const std::string& origin) {
    m.training_range.assign(m.features.size(), std::nullopt);
    const auto it = doc.find("training_range");
    if (it == doc.end()) return;
    if (!it->is_object()) throw ModelError(fmt::format("{}: training_range is not an object", origin));
    for (const auto& [name, bounds] : it->items()) {
        const size_t index = feature_index(m, name, "training_range", origin);
        const bool pair = bounds.is_array() && bounds.size() == 2 && bounds[0].is_number() && bounds[1].is_number();
        const double lowest = pair ? bounds[0].get<double>() : 0, highest = pair ? bounds[1].get<double>() : 0;
        if (!pair || !std::isfinite(lowest) || !std::isfinite(highest) || lowest > highest) {
            throw ModelError(fmt::format("{}: training_range[\"{}\"] must be [lowest, highest], finite, lowest <= highest", origin, name));
        }
        m.training_range[index] = FeatureRange{lowest, highest};
    }
}

// The optional "extrapolation": {"zone": {"feature": watts per unit >= 0}}, for target zones and for
// features with a training range (the slope applies beyond it).
void read_extrapolation(const json& doc, ModelMetadata& m, const std::string& origin) {
    const auto it = doc.find("extrapolation");
    if (it == doc.end()) return;
    if (!it->is_object()) throw ModelError(fmt::format("{}: extrapolation is not an object", origin));
    for (const auto& [zone, slopes] : it->items()) {
        const std::optional<ZoneKind> kind = zone_kind_from_name(zone);
        const bool target = kind && std::any_of(m.targets.begin(), m.targets.end(), [&](const ModelTarget& t) { return t.zone == *kind; });
        if (!target || !slopes.is_object()) {
            throw ModelError(fmt::format("{}: extrapolation[\"{}\"] must be a target zone's {{feature: watts per unit}}", origin, zone));
        }
        std::vector<double>& row = m.extrapolation_slopes[*kind];
        row.assign(m.features.size(), 0.0);
        for (const auto& [name, slope] : slopes.items()) {
            const size_t index = feature_index(m, name, "extrapolation", origin);
            if (!slope.is_number() || !std::isfinite(slope.get<double>()) || slope.get<double>() < 0) {
                throw ModelError(fmt::format("{}: extrapolation[\"{}\"][\"{}\"] must be watts per unit >= 0", origin, zone, name));
            }
            if (!m.training_range[index]) {
                throw ModelError(fmt::format("{}: extrapolation[\"{}\"] has a slope for {}, which has no training_range", origin, zone, name));
            }
            row[index] = slope.get<double>();
        }
    }
}

}  // namespace

fs::path metadata_path(const fs::path& spec_path) {
    std::error_code ec;
    if (fs::is_directory(spec_path, ec)) return spec_path / "model.json";
    if (spec_path.has_extension() && spec_path.extension() == ".json") return spec_path;
    return spec_path / "model.json";  // a directory that does not exist yet
}

std::string read_small_file(const fs::path& path, uintmax_t limit) {
    std::error_code ec;
    const uintmax_t size = fs::file_size(path, ec);
    if (ec) throw ModelError(fmt::format("{}: {}", path.string(), ec.message()));
    if (size > limit) throw ModelError(fmt::format("{}: {} bytes, more than the {} allowed", path.string(), size, limit));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ModelError(fmt::format("{}: cannot open", path.string()));
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

ModelMetadata parse_model_metadata(const std::string& text, const fs::path& directory, const std::string& origin) {
    const json doc = parse_json_object(text, origin);
    const std::string format = require(doc, "format", json::value_t::string, origin).get<std::string>();
    if (format != "keplershm-model/1") throw ModelError(fmt::format("{}: unknown format \"{}\"", origin, format));
    const std::string type = require(doc, "type", json::value_t::string, origin).get<std::string>();
    if (type != "xgboost") throw ModelError(fmt::format("{}: type \"{}\" is not \"xgboost\"", origin, type));

    ModelMetadata m;
    m.name = optional_string(doc, "name");
    m.version = optional_string(doc, "version");
    const std::string output = require(doc, "output", json::value_t::string, origin).get<std::string>();
    if (output != "absolute" && output != "dynamic") {
        throw ModelError(fmt::format("{}: output \"{}\" is neither \"absolute\" nor \"dynamic\"", origin, output));
    }
    m.dynamic_output = output == "dynamic";

    const json& features = require(doc, "features", json::value_t::array, origin);
    if (features.empty() || features.size() > kMaxFeatures) {
        throw ModelError(fmt::format("{}: {} features (1 to {} allowed)", origin, features.size(), kMaxFeatures));
    }
    for (const json& f : features) {
        if (!f.is_object()) throw ModelError(fmt::format("{}: a feature is not an object", origin));
        m.features.push_back(require(f, "name", json::value_t::string, origin).get<std::string>());
    }

    const json& targets = require(doc, "targets", json::value_t::array, origin);
    if (targets.empty() || targets.size() > kMaxTargets) {
        throw ModelError(fmt::format("{}: {} targets (1 to {} allowed)", origin, targets.size(), kMaxTargets));
    }
    for (const json& t : targets) {
        if (!t.is_object()) throw ModelError(fmt::format("{}: a target is not an object", origin));
        const std::string zone = require(t, "zone", json::value_t::string, origin).get<std::string>();
        const std::optional<ZoneKind> kind = zone_kind_from_name(zone);
        if (!kind) throw ModelError(fmt::format("{}: unknown target zone \"{}\"", origin, zone));
        for (const ModelTarget& seen : m.targets) {
            if (seen.zone == *kind) throw ModelError(fmt::format("{}: zone \"{}\" has two targets", origin, zone));
        }
        const std::string file = require(t, "file", json::value_t::string, origin).get<std::string>();
        m.targets.push_back(ModelTarget{*kind, directory / safe_relative(file, origin), target_digest(t, origin)});
    }

    m.idle_w = zone_watts(doc, "idle_w", origin);
    m.expected_error_w = zone_watts(doc, "expected_error_w", origin);
    if (auto it = doc.find("cpu"); it != doc.end() && it->is_object()) {
        m.cpu_model = optional_string(*it, "model");
        if (auto count = it->find("count"); count != it->end()) {
            // The CPUs the model was trained on, compared with this node's when models are ranked (0: unknown,
            // as train writes it for data that did not say).
            constexpr uint64_t kMostCpus = 1u << 20;
            if (!count->is_number_unsigned() || count->get<uint64_t>() > kMostCpus) {
                throw ModelError(fmt::format("{}: cpu.count must be a whole number of CPUs up to {} (0: unknown)", origin, kMostCpus));
            }
            m.cpu_count = static_cast<uint32_t>(count->get<uint64_t>());
        }
    }
    read_training_range(doc, m, origin);
    read_extrapolation(doc, m, origin);
    return m;
}

void check_sha256(std::string_view bytes, std::string_view expected_sha256, const std::string& origin) {
    if (expected_sha256.empty() || kepler::support::sha256_matches(bytes, expected_sha256)) return;
    throw ModelError(fmt::format("{}: sha256 is {}, but {} was pinned; the file is refused", origin,
                                 kepler::support::sha256_hex(bytes), expected_sha256));
}

ModelMetadata load_model_metadata(const fs::path& path, std::string_view expected_sha256) {
    const std::string text = read_small_file(path, kMaxMetadataBytes);
    check_sha256(text, expected_sha256, path.string());
    return parse_model_metadata(text, path.parent_path(), path.string());
}

std::string model_fingerprint(const fs::path& spec_path) {
    const fs::path meta = metadata_path(spec_path);
    std::error_code ec;
    auto stamp = [&](const fs::path& p) {
        const uintmax_t size = fs::file_size(p, ec);
        if (ec) return fmt::format("{}:missing;", p.string());
        const auto mtime = fs::last_write_time(p, ec).time_since_epoch().count();
        return fmt::format("{}:{}:{};", p.string(), size, static_cast<long long>(mtime));
    };
    if (!fs::exists(meta, ec)) return {};
    std::string print = stamp(meta);
    try {
        for (const ModelTarget& t : load_model_metadata(meta).targets) print += stamp(t.file);
    } catch (const ModelError&) {
        // A broken metadata file is fingerprinted by itself: the load attempt will report it.
    }
    return print;
}

}  // namespace kepler::estimate
