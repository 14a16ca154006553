#include "external/estimates_answer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace kepler_estimate {

namespace {

constexpr uint32_t kNoIndex = 0xffffffffu;
// Joules a row may claim: a megawatt for 1000 s. The exact bound (watts over the answered interval)
// is checked once the answer is matched to its collector frame.
constexpr double kMaxPlausibleJoules = kMaxPlausibleWatts * 1000;

bool plausible(double value, double bound) { return std::isfinite(value) && value >= 0 && value <= bound; }

}  // namespace

std::variant<EstimatesAnswer, RejectedAnswer> parse_answer(const keplershm::FrameView& frame) {
    const keplershm_header& segment = frame.segment();
    const FrameId id{frame.header().producer_generation, frame.header().producer_sequence};
    auto reject = [&](std::string reason) { return RejectedAnswer{id, std::move(reason)}; };
    if (segment.segment_kind != KEPLERSHM_SEGMENT_ESTIMATES) {
        return reject(fmt::format("the segment is of kind {} ({}), not an estimates segment (kind {})", segment.segment_kind,
                                  segment.segment_kind == KEPLERSHM_SEGMENT_FRAMES ? "collector frames" : "unknown",
                                  static_cast<int>(KEPLERSHM_SEGMENT_ESTIMATES)));
    }
    if (id.generation == 0 || id.sequence == 0) {
        return reject(fmt::format("the frame answers no collector frame (producer_generation {:#x}, producer_sequence {})",
                                  id.generation, id.sequence));
    }
    const keplershm::Records<keplershm_estimate> rows = frame.estimates();
    if (rows.size() > kMaxAnswerRows) {
        return reject(fmt::format("{} rows, more than the {} accepted", rows.size(), kMaxAnswerRows));
    }
    const uint32_t zone_count = std::min<uint32_t>(segment.zone_count, KEPLERSHM_MAX_ZONES);
    EstimatesAnswer answer;
    answer.frame = id;
    std::map<ZoneKind, double> joules;
    std::set<uint32_t> zones_seen;
    for (uint32_t i = 0; i < rows.size(); ++i) {
        const keplershm_estimate row = rows[i];  // one copy: the fields are read once
        if (!plausible(row.energy_joules, kMaxPlausibleJoules) || !plausible(row.power_watts, kMaxPlausibleWatts)) {
            return reject(fmt::format("row {}: energy_joules {} / power_watts {} is not a finite non-negative number "
                                      "within {} W", i, row.energy_joules, row.power_watts, kMaxPlausibleWatts));
        }
        if (row.pid != 0) {
            ++answer.process_rows;
            continue;
        }
        if (row.workload_index != kNoIndex) {
            ++answer.workload_rows;
            continue;
        }
        ZoneKind kind = ZoneKind::platform;  // zone_index 0xffffffff: the whole node
        if (row.zone_index != kNoIndex) {
            if (row.zone_index >= zone_count) {
                return reject(fmt::format("row {}: zone_index {} but the estimates segment declares {} zone(s)", i,
                                          row.zone_index, zone_count));
            }
            const std::optional<ZoneKind> known = zone_kind_from_protocol(segment.zones[row.zone_index].kind);
            if (!known) {
                return reject(fmt::format("row {}: zone {} has unknown kind {}", i, row.zone_index,
                                          segment.zones[row.zone_index].kind));
            }
            kind = *known;
        }
        if (!zones_seen.insert(row.zone_index).second) {
            return reject(fmt::format("row {}: zone_index {:#x} answered twice", i, row.zone_index));
        }
        joules[kind] += row.energy_joules;  // zones of one kind on several sockets add up
    }
    // A whole-node row is zone `platform`: with a platform zone row as well it would count twice.
    const bool platform_zone = std::any_of(zones_seen.begin(), zones_seen.end(), [&](uint32_t z) {
        return z != kNoIndex && zone_kind_from_protocol(segment.zones[z].kind) == ZoneKind::platform;
    });
    if (zones_seen.count(kNoIndex) && platform_zone) {
        return reject("both a whole-node row and a platform zone row (the node would count twice)");
    }
    if (joules.empty()) {
        return reject("no node or zone rows (per-process and per-workload rows alone are not used yet)");
    }
    answer.zones.assign(joules.begin(), joules.end());
    return answer;
}

}  // namespace kepler_estimate
