// libFuzzer: the restricted unpickler of the scaler.pkl inside Kepler's XGBoost zips
// (kepler-estimate/model/kepler/pickle_scaler.cpp). Any bytes: either a MaxAbsScaler whose every scale
// is a finite positive number, or ModelError. Anything else escaping, a crash, a leak (a value made to
// hold itself) or a hang is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/kepler/pickle_scaler.hpp"
#include "model/model_metadata.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace kepler::estimate;
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    try {
        const MaxAbsScaler scaler = parse_max_abs_scaler(bytes);
        if (scaler.scale.empty() || scaler.scale.size() > size / 8) __builtin_trap();  // 8 stream bytes per value
        for (const double s : scaler.scale) {
            if (!std::isfinite(s) || s <= 0) __builtin_trap();
        }
    } catch (const ModelError&) {
        // refused: the documented outcome for a bad file
    }
    return 0;
}
