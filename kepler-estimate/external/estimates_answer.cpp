#include "external/estimates_answer.hpp"

#include <map>

#include "keplershm/estimates.hpp"

namespace kepler::estimate {

std::variant<EstimatesAnswer, RejectedAnswer> parse_answer(const keplershm::FrameView& frame) {
    const keplershm_header& segment = frame.segment();
    const FrameId id{frame.header().producer_generation, frame.header().producer_sequence};
    auto reject = [&](std::string reason) { return RejectedAnswer{id, std::move(reason)}; };
    const keplershm::Records<keplershm_estimate> rows = frame.estimates();
    if (std::string why = keplershm::estimates_refusal(segment, frame.header(), rows, kMaxAnswerRows); !why.empty()) {
        return reject(std::move(why));
    }
    EstimatesAnswer answer;
    answer.frame = id;
    std::map<ZoneKind, double> joules;
    bool node_or_zone_row = false;
    for (uint32_t i = 0; i < rows.size(); ++i) {
        const keplershm_estimate row = rows[i];
        if (row.pid != 0) {
            ++answer.process_rows;
            continue;
        }
        if (row.workload_index != keplershm::kNoEstimateIndex) {
            ++answer.workload_rows;
            continue;
        }
        ZoneKind kind = ZoneKind::platform;  // zone_index 0xffffffff: the whole node
        if (row.zone_index != keplershm::kNoEstimateIndex) {  // a declared zone of a known kind (checked above)
            kind = zone_kind_from_protocol(segment.zones[row.zone_index].kind).value_or(ZoneKind::other);
        }
        joules[kind] += row.energy_joules;  // zones of one kind on several sockets add up
        node_or_zone_row = true;
    }
    if (!node_or_zone_row) {
        return reject("no node or zone rows (per-process and per-workload rows alone are not used yet)");
    }
    answer.zones.assign(joules.begin(), joules.end());
    return answer;
}

}  // namespace kepler::estimate
