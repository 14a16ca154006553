// libFuzzer: dcgm-exporter's Prometheus text as the collector parses it for MIG instances' activity
// (kepler-collect/energy/gpu/dcgm_metrics.cpp). Any bytes: either a clear refusal, or activities that are
// ratios between 0 and 1, each for a (GPU, GPU instance) pair, at most a node's worth.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/text_io.hpp"
#include "energy/gpu/dcgm_exporter.hpp"

namespace {

void require(bool holds) {
    if (!holds) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const kepler::collect::MigActivities activities = kepler::collect::parse_dcgm_activities(text);
        require(activities.size() <= 4096);
        require(activities.empty() || text.find("DCGM_FI_PROF_GR_ENGINE_ACTIVE") != std::string_view::npos);
        for (const auto& [key, ratio] : activities) require(std::isfinite(ratio) && ratio >= 0 && ratio <= 1);
    } catch (const kepler::collect::CollectError&) {
        // refused: the product logs the sentence and keeps its last answer
    }
    return 0;
}
