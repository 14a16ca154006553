// Estimates segments are untrusted input: the feed refuses an answer that breaks PROTOCOL.md §8's
// consumer rules, with the reason, before any subscriber sees it.
#include <gtest/gtest.h>

#include <cstring>

#include "join/estimates_board.hpp"

namespace kepler::feed {
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

// The rules themselves are libkeplershm's (keplershm::estimates_refusal, tested there); the feed applies
// them to its reader's copy and adds what concerns that copy.
TEST(Refusal, PROTOCOLRulesApplyToTheReadersCopy) {
    EXPECT_NE(refusal(answer({row(0, kNo, 1), row(0, kNo, 2)})).find("a second row"), std::string::npos);
    EXPECT_NE(refusal(answer({row(0, kNo, 1)}, {99})).find("unknown kind"), std::string::npos);
    keplershm_estimate too_much = row(0, kNo, 1);
    too_much.energy_joules = 3e6;
    EXPECT_NE(refusal(answer({too_much})).find("not a finite"), std::string::npos) << "3 MJ over the answer's one second";
    Snapshot kind = answer({row(0, kNo, 1)});
    std::const_pointer_cast<SegmentFacts>(kind.segment)->header.segment_kind = KEPLERSHM_SEGMENT_FRAMES;
    EXPECT_NE(refusal(kind).find("not an estimates segment"), std::string::npos);
    EXPECT_NE(refusal(answer({row(0, kNo, 1), row(0, 1, 1)}), 1).find("more than"), std::string::npos);
}

TEST(Refusal, TheCopyMustHoldItsRows) {
    Snapshot short_rows = answer({row(0, kNo, 1)});
    short_rows.sections[0].bytes.resize(8);
    EXPECT_NE(refusal(short_rows).find("stride"), std::string::npos);
    Snapshot no_section = answer({});
    no_section.sections.clear();
    EXPECT_EQ(refusal(no_section), "the frame has no estimates section");
    std::const_pointer_cast<SegmentFacts>(no_section.segment)->header.segment_kind = KEPLERSHM_SEGMENT_FRAMES;
    EXPECT_NE(refusal(no_section).find("not an estimates segment"), std::string::npos) << "the segment's kind first";
}

}  // namespace
}  // namespace kepler::feed
