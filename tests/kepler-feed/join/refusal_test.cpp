// Estimates segments are untrusted input: the feed refuses an answer that breaks PROTOCOL.md §8's
// consumer rules, with the reason, before any subscriber sees it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "join/estimates_board.hpp"

namespace kepler_feed {
namespace {

constexpr uint32_t kNo = 0xffffffffu;

keplershm_estimate row(uint32_t zone, uint32_t workload, double watts) {
    keplershm_estimate r{};
    r.zone_index = zone;
    r.workload_index = workload;
    r.power_watts = watts;
    r.energy_joules = watts;  // over the 1 s interval below
    return r;
}

/// An answer to frame (1, 1) over 1 s from a segment declaring zones of `kinds`.
Snapshot answer(const std::vector<keplershm_estimate>& rows, const std::vector<uint32_t>& kinds = {KEPLERSHM_ZONE_PACKAGE}) {
    auto facts = std::make_shared<SegmentFacts>();
    facts->header.segment_kind = KEPLERSHM_SEGMENT_ESTIMATES;
    facts->header.zone_count = static_cast<uint32_t>(kinds.size());
    for (size_t i = 0; i < kinds.size(); ++i) facts->header.zones[i].kind = kinds[i];
    Snapshot s;
    s.segment = facts;
    s.header.producer_generation = 1;
    s.header.producer_sequence = 1;
    s.header.interval_start_ns = 1'000'000'000;
    s.header.interval_end_ns = 2'000'000'000;
    Snapshot::Section section{KEPLERSHM_SECTION_ESTIMATES, sizeof(keplershm_estimate), static_cast<uint32_t>(rows.size()), {}};
    section.bytes.resize(rows.size() * sizeof(keplershm_estimate));
    if (!rows.empty()) std::memcpy(section.bytes.data(), rows.data(), section.bytes.size());
    s.sections.push_back(std::move(section));
    return s;
}

TEST(Refusal, AWellFormedAnswerIsServed) {
    EXPECT_EQ(refusal(answer({row(0, kNo, 20), row(0, 3, 5), row(kNo, 3, 6)})), "");
}

TEST(Refusal, EachBrokenRuleIsNamed) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const struct {
        Snapshot snapshot;
        const char* says;
    } cases[] = {
        {answer({row(0, kNo, nan)}), "not a finite"},
        {answer({row(0, kNo, -1)}), "not a finite"},
        {answer({row(0, kNo, 2e6)}), "within"},
        {answer({row(1, kNo, 1)}), "declares 1 zone"},
        {answer({row(0, kNo, 1)}, {99}), "unknown kind"},
        {answer({row(0, kNo, 1), row(0, kNo, 2)}), "a second row"},
        {answer({row(kNo, kNo, 1), row(0, kNo, 2)}, {KEPLERSHM_ZONE_PSYS}), "count twice"},
    };
    for (const auto& c : cases) EXPECT_NE(refusal(c.snapshot).find(c.says), std::string::npos) << refusal(c.snapshot);

    keplershm_estimate too_much = row(0, kNo, 1);
    too_much.energy_joules = 3e6;
    const Snapshot energy = answer({too_much});
    EXPECT_NE(refusal(energy), "") << "3 MJ over one second";
    Snapshot kind = answer({row(0, kNo, 1)});
    std::const_pointer_cast<SegmentFacts>(kind.segment)->header.segment_kind = KEPLERSHM_SEGMENT_FRAMES;
    EXPECT_NE(refusal(kind).find("not an estimates segment"), std::string::npos);
    Snapshot unanswered = answer({row(0, kNo, 1)});
    unanswered.header.producer_sequence = 0;
    EXPECT_NE(refusal(unanswered).find("answers no collector frame"), std::string::npos);
    EXPECT_NE(refusal(answer({row(0, kNo, 1), row(0, 1, 1)}), 1).find("more than"), std::string::npos);
    Snapshot short_rows = answer({row(0, kNo, 1)});
    short_rows.sections[0].bytes.resize(8);
    EXPECT_NE(refusal(short_rows).find("stride"), std::string::npos);
}

}  // namespace
}  // namespace kepler_feed
