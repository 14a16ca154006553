// PROTOCOL.md §8's consumer rules (keplershm::estimates_refusal), each broken on its own, on rows built in
// memory: every consumer in the project (kepler-estimate, kepler-feed) refuses exactly these answers.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "keplershm/estimates.hpp"

namespace {

constexpr uint32_t kNo = keplershm::kNoEstimateIndex;

keplershm_estimate row(uint32_t zone, double watts, uint32_t workload = kNo, uint32_t pid = 0) {
    keplershm_estimate r{};
    r.zone_index = zone;
    r.workload_index = workload;
    r.pid = pid;
    r.start_time_ticks = pid != 0 ? 100 : 0;
    r.power_watts = watts;
    r.energy_joules = watts * 2;  // over the 2 s interval of the frame below
    return r;
}

struct Answer {
    keplershm_header segment{};
    keplershm_frame frame{};
    std::vector<keplershm_estimate> rows;

    explicit Answer(std::vector<keplershm_estimate> r, const std::vector<uint32_t>& kinds = {KEPLERSHM_ZONE_PACKAGE,
                                                                                            KEPLERSHM_ZONE_DRAM})
        : rows(std::move(r)) {
        segment.segment_kind = KEPLERSHM_SEGMENT_ESTIMATES;
        segment.zone_count = static_cast<uint32_t>(kinds.size());
        for (size_t i = 0; i < kinds.size(); ++i) segment.zones[i].kind = kinds[i];
        frame.producer_generation = 0xabc;
        frame.producer_sequence = 7;
        frame.interval_start_ns = 1'000'000'000;
        frame.interval_end_ns = 3'000'000'000;
    }
    [[nodiscard]] std::string refusal(uint32_t max_rows = 65536) const {
        const keplershm::Records<keplershm_estimate> records(rows.data(), static_cast<uint32_t>(rows.size()),
                                                             sizeof(keplershm_estimate));
        return keplershm::estimates_refusal(segment, frame, records, max_rows);
    }
};

TEST(EstimatesRefusal, EveryKindOfRowTogetherIsUsable) {
    const Answer a({row(kNo, 90), row(0, 60), row(1, 10), row(kNo, 5, 3), row(0, 4, 3), row(kNo, 2, kNo, 42),
                    row(0, 1, kNo, 42)});
    EXPECT_EQ(a.refusal(), "");
    EXPECT_EQ(Answer({}).refusal(), "") << "no rows: nothing wrong, nothing to use (each consumer decides)";
}

TEST(EstimatesRefusal, EachBrokenRuleIsRefusedWithItsReason) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    keplershm_estimate too_much_energy = row(0, 1);
    too_much_energy.energy_joules = 2.5e6;  // more than 10^6 W over 2 s
    const struct {
        Answer answer;
        const char* says;
    } cases[] = {
        {Answer({row(0, 10), row(1, nan)}), "row 1: energy_joules nan / power_watts nan is not a finite"},
        {Answer({row(0, -1)}), "row 0: energy_joules -2 / power_watts -1"},
        {Answer({row(0, inf)}), "not a finite non-negative number within 1000000 W"},
        {Answer({row(kNo, nan, kNo, 7)}), "row 0: energy_joules nan"},  // per-process rows are checked too
        {Answer({row(0, 2e6)}), "power_watts 2000000"},
        {Answer({too_much_energy}), "energy_joules 2500000"},
        {Answer({row(2, 1)}), "row 0: zone_index 2 but the estimates segment declares 2 zone(s)"},
        {Answer({row(0xfffffffe, 1)}), "zone_index 4294967294"},
        {Answer({row(0, 1)}, {99}), "row 0: zone 0 has unknown kind 99"},
        {Answer({row(0, 1), row(0, 2)}), "row 1: a second row for zone 0x0, workload 0xffffffff, process 0"},
        {Answer({row(kNo, 1, 3), row(kNo, 2, 3)}), "a second row for zone 0xffffffff, workload 0x3"},
        {Answer({row(kNo, 1, kNo, 42), row(kNo, 2, kNo, 42)}), "process 42"},
        {Answer({row(kNo, 1), row(0, 2)}, {KEPLERSHM_ZONE_PSYS}), "both a whole-node row and a platform zone row"},
        {Answer({row(kNo, 1), row(0, 2)}, {KEPLERSHM_ZONE_PLATFORM}), "the node would count twice"},
    };
    for (const auto& c : cases) {
        const std::string why = c.answer.refusal();
        EXPECT_NE(why.find(c.says), std::string::npos) << "wanted \"" << c.says << "\", got: " << why;
    }
}

TEST(EstimatesRefusal, TheSegmentAndFrameAreCheckedBeforeAnyRow) {
    Answer collector({row(0, 1)});
    collector.segment.segment_kind = KEPLERSHM_SEGMENT_FRAMES;
    EXPECT_NE(collector.refusal().find("kind 1 (collector frames), not an estimates segment (kind 2)"), std::string::npos);
    Answer unanswered({row(0, 1)});
    unanswered.frame.producer_sequence = 0;
    EXPECT_NE(unanswered.refusal().find("the frame answers no collector frame"), std::string::npos);
    unanswered.frame.producer_sequence = 7;
    unanswered.frame.producer_generation = 0;
    EXPECT_NE(unanswered.refusal().find("producer_generation 0x0"), std::string::npos);
    const Answer many({row(0, 1), row(1, 1), row(kNo, 1, 2)});
    EXPECT_EQ(many.refusal(2), "3 rows, more than the 2 accepted");
}

TEST(EstimatesRefusal, WithoutAnIntervalEnergyIsBoundedByAThousandSeconds) {
    keplershm_estimate r = row(0, 1);
    r.energy_joules = 5e8;  // 10^6 W for 500 s: plausible when the answer does not say how long it covers
    Answer a({r});
    a.frame.interval_start_ns = a.frame.interval_end_ns = 0;
    EXPECT_EQ(a.refusal(), "");
    a.rows[0].energy_joules = 2e9;
    EXPECT_NE(a.refusal().find("energy_joules 2000000000"), std::string::npos);
}

}  // namespace
