// One frame of an estimates segment (PROTOCOL.md §8), validated: which collector frame it answers and
// the node energy per zone it gives. Estimates segments are written by other programs (a Python
// notebook, a sidecar): every row is untrusted and a bad row refuses the whole answer with a reason.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "keplershm/keplershm.hpp"
#include "core/frame_id.hpp"
#include "core/zones.hpp"

namespace kepler::estimate {

/// A validated answer. Plain value.
struct EstimatesAnswer {
    FrameId frame;                                  // the collector frame answered
    std::vector<std::pair<ZoneKind, double>> zones;  // joules per zone kind (sockets summed), node rows only
    uint32_t workload_rows = 0;                     // per-workload rows (counted, not used yet)
    uint32_t process_rows = 0;                      // per-process rows (counted, not used yet)
};

/// An estimates frame that cannot be used, and why (names the row and value at fault). Plain value.
struct RejectedAnswer {
    FrameId frame;  // as the frame header claims it (may itself be the problem)
    std::string reason;
};

/// Rows an answer may have: node and zone rows are at most 33, per-process rows for a large node a few
/// thousand; more is a broken or hostile producer, refused before its rows are looked at.
inline constexpr uint32_t kMaxAnswerRows = 65536;

/// Validates one frame read from an estimates segment (PROTOCOL.md §8's rules, keplershm::estimates_refusal)
/// and sums its node and zone rows per zone kind. A private copy of the frame (Reader::next or a recording).
[[nodiscard]] std::variant<EstimatesAnswer, RejectedAnswer> parse_answer(const keplershm::FrameView& frame);

}  // namespace kepler::estimate
