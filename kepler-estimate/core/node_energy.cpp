#include "core/node_energy.hpp"

#include <cmath>

namespace kepler::estimate {

uint64_t watts_to_uj(double watts, double seconds) noexcept {
    const double uj = watts * seconds * 1e6;
    if (!std::isfinite(uj) || uj <= 0) return 0;
    if (uj >= 1.8e19) return UINT64_MAX / 2;  // absurd input; never wrap
    return static_cast<uint64_t>(std::llround(uj));
}

}  // namespace kepler::estimate
