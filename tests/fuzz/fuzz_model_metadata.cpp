// libFuzzer: MODELS.md's model.json (kepler-estimate/model/model_metadata.cpp). Any bytes: either metadata
// with 1 to 256 features, 1 to 16 targets of distinct zones whose files stay inside the model directory,
// and finite non-negative idle and error watts, or ModelError. Another exception type escaping (nlohmann's
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
    return 0;
}
