// libFuzzer: Kepler 0.7's linear weights (SGDRegressorTrainer_N.json, kepler-estimate/model/kepler/
// kepler_weights.cpp). Any bytes: either a predictor with 1 to 64 features and at least one zone, each
// zone named once, that answers one number per zone for a row of its features' width, or ModelError.
// A crash, an exception of another type (nlohmann's own, std::out_of_range) or a hang is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/kepler/kepler_predictor.hpp"
#include "model/model_metadata.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace kepler::estimate;
    const std::string text(reinterpret_cast<const char*>(data), size);
    const bool dynamic = size % 2 == 1;
    std::unique_ptr<KeplerPredictor> predictor;
    try {
        predictor = parse_kepler_weights(text, dynamic, "fuzz.json");
    } catch (const ModelError&) {
        return 0;  // refused: the documented outcome for a bad file
    }
    const std::vector<std::string>& features = predictor->features();
    const std::vector<ZoneKind>& zones = predictor->zones();
    if (features.empty() || features.size() > 64 || zones.empty() || predictor->dynamic() != dynamic) __builtin_trap();
    std::vector<ZoneKind> sorted = zones;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) __builtin_trap();  // one output per zone
    const std::vector<double> watts = predictor->predict(std::vector<double>(features.size(), 1.0));
    if (watts.size() != zones.size()) __builtin_trap();  // (extreme finite weights may overflow: not checked)
    return 0;
}
