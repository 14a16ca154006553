// The identity of a collector frame across collector restarts.
#pragma once

#include <compare>
#include <cstdint>

namespace kepler::estimate {

/// A collector frame: its writer generation and sequence. Sequence alone is ambiguous (a collector
/// started afresh numbers from 1 again). Plain value.
struct FrameId {
    uint64_t generation = 0;
    uint64_t sequence = 0;
    auto operator<=>(const FrameId&) const = default;
};

}  // namespace kepler::estimate
