// estimates.hpp — PROTOCOL.md §8's consumer rules for one answer of an estimates segment, defined once
// for every consumer in the project (kepler-estimate's external models, kepler-feed's join). Estimates
// segments are written by other programs (a notebook, a sidecar): every row is untrusted, and one bad row
// refuses the whole answer. Part of the C++ API (keplershm::cpp), not of the stable C ABI.
#pragma once

#include <cstdint>
#include <string>

#include "keplershm/keplershm.hpp"

namespace keplershm {

/// A row's power above this is a broken producer, not a computer (the largest servers draw ~10 kW).
inline constexpr double kMaxEstimateWatts = 1e6;
/// zone_index or workload_index of a row that is about the whole node or no single workload.
inline constexpr uint32_t kNoEstimateIndex = 0xffffffffu;

/// Why a consumer must not use `rows`, the answer carried by `frame` of the estimates segment described
/// by `segment`, or "" when it may. Each row is copied once before it is checked, so rows in shared
/// memory cannot change between two checks. Refused, naming the row and value at fault: a segment that is not of
/// the estimates kind; an answer that names no collector frame; more than `max_rows` rows; a row whose
/// power or energy is not finite, is negative or exceeds 10^6 W (over the answered interval, or 1000 s
/// when the frame does not carry it); a zone_index beyond the declared zones or naming a zone of unknown
/// kind; two rows for one (zone, workload, process); a node row beside a platform or psys zone row.
[[nodiscard]] std::string estimates_refusal(const keplershm_header& segment, const keplershm_frame& frame,
                                            Records<keplershm_estimate> rows, uint32_t max_rows);

}  // namespace keplershm
