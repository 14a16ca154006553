// libFuzzer: MODELS.md's model.json (kepler-estimate/model/model_metadata.cpp). Any bytes: either metadata
// with 1 to 256 features, 1 to 16 targets of distinct zones whose files stay inside the model directory,
// finite non-negative idle and error watts, finite training ranges (lowest <= highest) parallel to the features,
// and finite non-negative slopes only for target zones and ranged features, or ModelError. Another exception type escaping (nlohmann's
// own), a crash or a hang is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "model/model_metadata.hpp"

namespace {

void require(bool holds) {
    if (!holds) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace kepler::estimate;
    namespace fs = std::filesystem;
    const std::string text(reinterpret_cast<const char*>(data), size);
    const fs::path directory = "/models/fuzz";
    ModelMetadata m;
    try {
        m = parse_model_metadata(text, directory, "fuzz/model.json");
    } catch (const ModelError&) {
        return 0;  // refused: the documented outcome for a bad file
    }
    require(!m.features.empty() && m.features.size() <= 256);
    require(!m.targets.empty() && m.targets.size() <= 16);
    std::set<ZoneKind> zones;
    for (const ModelTarget& t : m.targets) {
        require(zones.insert(t.zone).second);
        const fs::path relative = t.file.lexically_relative(directory);
        require(!relative.empty() && !relative.is_absolute());
        for (const fs::path& part : relative) require(part != "..");
    }
    for (const auto* watts : {&m.idle_w, &m.expected_error_w}) {
        for (const auto& [zone, w] : *watts) require(std::isfinite(w) && w >= 0);
    }
    require(m.training_range.size() == m.features.size());
    for (const auto& range : m.training_range) {
        if (range) require(std::isfinite(range->lowest) && std::isfinite(range->highest) && range->lowest <= range->highest);
    }
    for (const auto& [zone, slopes] : m.extrapolation_slopes) {
        require(zones.count(zone) == 1 && slopes.size() == m.features.size());
        for (size_t f = 0; f < slopes.size(); ++f) require(std::isfinite(slopes[f]) && slopes[f] >= 0 && (slopes[f] == 0 || m.training_range[f]));
    }
    return 0;
}
