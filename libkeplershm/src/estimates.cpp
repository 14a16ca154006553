#include "keplershm/estimates.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

namespace keplershm {

namespace {

constexpr double kSecondsWithoutInterval = 1000;  // the energy bound when the answer has no interval

bool plausible(double value, double bound) { return std::isfinite(value) && value >= 0 && value <= bound; }

bool known_zone_kind(uint32_t kind) { return kind >= KEPLERSHM_ZONE_PACKAGE && kind <= KEPLERSHM_ZONE_OTHER; }

bool platform_kind(uint32_t kind) { return kind == KEPLERSHM_ZONE_PSYS || kind == KEPLERSHM_ZONE_PLATFORM; }

/// The rules one row must meet on its own; "" when it does.
std::string row_refusal(const keplershm_estimate& r, uint32_t i, const keplershm_header& segment, double max_joules) {
    if (!plausible(r.energy_joules, max_joules) || !plausible(r.power_watts, kMaxEstimateWatts)) {
        return fmt::format("row {}: energy_joules {} / power_watts {} is not a finite non-negative number within {} W",
                           i, r.energy_joules, r.power_watts, kMaxEstimateWatts);
    }
    if (r.zone_index == kNoEstimateIndex) return "";
    const uint32_t zones = std::min<uint32_t>(segment.zone_count, KEPLERSHM_MAX_ZONES);
    if (r.zone_index >= zones) {
        return fmt::format("row {}: zone_index {} but the estimates segment declares {} zone(s)", i, r.zone_index,
                           segment.zone_count);
    }
    if (!known_zone_kind(segment.zones[r.zone_index].kind)) {
        return fmt::format("row {}: zone {} has unknown kind {}", i, r.zone_index, segment.zones[r.zone_index].kind);
    }
    return "";
}

}  // namespace

std::string estimates_refusal(const keplershm_header& segment, const keplershm_frame& frame,
                              Records<keplershm_estimate> rows, uint32_t max_rows) {
    if (segment.segment_kind != KEPLERSHM_SEGMENT_ESTIMATES) {
        return fmt::format("the segment is of kind {} ({}), not an estimates segment (kind {})", segment.segment_kind,
                           segment.segment_kind == KEPLERSHM_SEGMENT_FRAMES ? "collector frames" : "unknown",
                           static_cast<int>(KEPLERSHM_SEGMENT_ESTIMATES));
    }
    if (frame.producer_generation == 0 || frame.producer_sequence == 0) {
        return fmt::format("the frame answers no collector frame (producer_generation {:#x}, producer_sequence {})",
                           frame.producer_generation, frame.producer_sequence);
    }
    if (rows.size() > max_rows) return fmt::format("{} rows, more than the {} accepted", rows.size(), max_rows);
    const double seconds = frame.interval_end_ns > frame.interval_start_ns
                               ? static_cast<double>(frame.interval_end_ns - frame.interval_start_ns) / 1e9
                               : kSecondsWithoutInterval;
    std::set<std::tuple<uint32_t, uint32_t, uint32_t, uint64_t>> keys;
    bool node_row = false, platform_row = false;
    for (uint32_t i = 0; i < rows.size(); ++i) {
        const keplershm_estimate r = rows[i];  // one copy: every field is read once
        if (std::string why = row_refusal(r, i, segment, kMaxEstimateWatts * seconds); !why.empty()) return why;
        if (!keys.emplace(r.zone_index, r.workload_index, r.pid, r.start_time_ticks).second) {
            return fmt::format("row {}: a second row for zone {:#x}, workload {:#x}, process {}", i, r.zone_index,
                               r.workload_index, r.pid);
        }
        if (r.workload_index != kNoEstimateIndex || r.pid != 0) continue;
        if (r.zone_index == kNoEstimateIndex) node_row = true;
        else platform_row |= platform_kind(segment.zones[r.zone_index].kind);
    }
    if (node_row && platform_row) return "both a whole-node row and a platform zone row (the node would count twice)";
    return "";
}

}  // namespace keplershm
