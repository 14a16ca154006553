// Node energy per zone for one interval: what a node model answers and what attribution splits. The
// estimator's stages after the models (attribute, aggregate, export) depend on this and core/zones.hpp,
// never on model/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/zones.hpp"

namespace kepler::estimate {

/// Energy of one zone over the interval, integer microjoules so that attribution can conserve it
/// exactly; idle_uj <= total_uj. Plain value.
struct ZoneEnergy {
    ZoneKey zone;
    uint64_t total_uj = 0;
    uint64_t idle_uj = 0;
    std::string meter;  // the `source` label of this zone when it differs by zone ("rapl", "redfish"); "" = NodeEnergy's
};

/// A node model's answer for one interval. Plain value.
struct NodeEnergy {
    std::vector<ZoneEnergy> zones;
    std::string source;  // the `source` label: the meter ("rapl", "hwmon", "acpi") or the model name
};

/// Watts over `seconds` to microjoules (negative and non-finite watts count as 0, MODELS.md).
[[nodiscard]] uint64_t watts_to_uj(double watts, double seconds) noexcept;

}  // namespace kepler::estimate
