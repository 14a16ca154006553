// Turns a shared Snapshot into one subscriber's Frame message: only the sections, fields and
// workloads it selected, one packed column per field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "join/estimates_board.hpp"
#include "read/frame_reader.hpp"
#include "select/selection.hpp"

namespace kepler::feed {

/// Text for a proto3 string field, which must be UTF-8 (a Python client refuses the whole message
/// otherwise). Text from the segment is untrusted: bytes that do not form UTF-8 become '?'.
[[nodiscard]] std::string utf8(std::string_view text);

/// Header facts and schema of a generation, as sent in Frame.segment and Describe().
void fill_segment(const SegmentFacts& facts, v1::Segment& out);

/// Per subscriber; remembers which generation it described last. Not thread-safe.
class FrameEncoder {
public:
    explicit FrameEncoder(Selection selection);

    /// `extra_missed` adds frames this subscriber lost before `snapshot` (a start the feed no longer held);
    /// `answers` (section "estimates" selected) become the frame's `estimates`, one per source.
    void encode(const Snapshot& snapshot, uint64_t extra_missed, v1::Frame& out,
                const std::vector<SourceAnswer>& answers = {});
    /// Whether the subscriber selected section "estimates" (and so wants the sources' answers).
    [[nodiscard]] bool wants_estimates() const noexcept { return estimates_plan_.has_value(); }

private:
    /// Which process and workload rows to send, and where workload indices move to.
    struct Rows {
        std::vector<uint32_t> processes;
        std::vector<uint32_t> workloads;
        std::vector<uint32_t> workload_map;  // old index → new index, KEPLERSHM_NO_WORKLOAD when left out
        bool remap = false;
    };
    [[nodiscard]] Rows plan_rows(const Snapshot& snapshot) const;
    [[nodiscard]] bool workload_matches(const keplershm_workload& workload) const;
    void encode_section(const Snapshot& snapshot, const SectionPlan& plan, const Rows& rows, v1::Section& out) const;
    void encode_answer(const Snapshot& frame, const Rows& rows, const SourceAnswer& answer, v1::ModelEstimates& out) const;

    Selection selection_;
    std::optional<SectionPlan> estimates_plan_;  // section "estimates", when selected
    uint64_t described_generation_ = 0;
};

}  // namespace kepler::feed
