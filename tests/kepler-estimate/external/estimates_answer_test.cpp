// The estimates channel's rules without threads or clocks: what makes an answer valid (PROTOCOL.md §8)
// and how answers are matched to frames (ready, on time, late, missing, rejected).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "external/answer_matcher.hpp"
#include "external/estimates_answer.hpp"
#include "support/test_estimates.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;
using std::chrono::milliseconds;

namespace {

/// Publishes one estimates frame and parses it as the estimator's reader thread does.
class Roundtrip {
public:
    explicit Roundtrip(const keplershm::WriterOptions& options)
        : name_(unique_segment_name("answer")), estimates_(name_, options), reader_(keplershm::Reader::open(name_)) {}

    std::variant<EstimatesAnswer, RejectedAnswer> parse(uint64_t generation, uint64_t sequence,
                                                         const std::vector<keplershm_estimate>& rows) {
        estimates_.answer(generation, sequence, rows);
        if (reader_.next(milliseconds(1000), view_) != keplershm::Status::ok) throw std::runtime_error("answer not read back");
        return parse_answer(view_);
    }

private:
    std::string name_;
    TestEstimates estimates_;
    keplershm::Reader reader_;
    keplershm::FrameView view_;
};

std::vector<keplershm_zone_info> two_sockets_and_dram() {
    return {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0), zone_info("package-1", KEPLERSHM_ZONE_PACKAGE, 1),
            zone_info("dram", KEPLERSHM_ZONE_DRAM, 0), zone_info("psys", KEPLERSHM_ZONE_PSYS, 0)};
}

std::string rejection(const std::variant<EstimatesAnswer, RejectedAnswer>& result) {
    if (const auto* r = std::get_if<RejectedAnswer>(&result)) return r->reason;
    return "(accepted)";
}

double joules_of(const EstimatesAnswer& a, ZoneKind kind) {
    for (const auto& [k, j] : a.zones) {
        if (k == kind) return j;
    }
    return -1;
}

}  // namespace

TEST(ParseAnswer, ZoneRowsAddUpPerKindAndOtherRowsAreCounted) {
    Roundtrip rt(estimates_options(two_sockets_and_dram()));
    keplershm_estimate workload = node_row(kNoIndex, 3.0);
    workload.workload_index = 2;
    const auto result = rt.parse(0xabc, 7, {node_row(0, 30.0), node_row(1, 20.0), node_row(2, 5.0), process_row(42, 1234, 1.5), workload});
    ASSERT_TRUE(std::holds_alternative<EstimatesAnswer>(result)) << rejection(result);
    const auto& a = std::get<EstimatesAnswer>(result);
    EXPECT_EQ(a.frame, (FrameId{0xabc, 7}));
    EXPECT_DOUBLE_EQ(joules_of(a, ZoneKind::package), 50.0);  // two sockets summed
    EXPECT_DOUBLE_EQ(joules_of(a, ZoneKind::dram), 5.0);
    EXPECT_EQ(a.zones.size(), 2u);
    EXPECT_EQ(a.process_rows, 1u);
    EXPECT_EQ(a.workload_rows, 1u);
}

TEST(ParseAnswer, AWholeNodeRowIsPlatform) {
    Roundtrip rt(estimates_options({}));
    const auto result = rt.parse(1, 1, {node_row(kNoIndex, 80.0)});
    ASSERT_TRUE(std::holds_alternative<EstimatesAnswer>(result)) << rejection(result);
    EXPECT_DOUBLE_EQ(joules_of(std::get<EstimatesAnswer>(result), ZoneKind::platform), 80.0);
}

TEST(ParseAnswer, BadRowsRefuseTheWholeAnswerAndSayWhy) {
    Roundtrip rt(estimates_options(two_sockets_and_dram()));
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    struct Case {
        std::vector<keplershm_estimate> rows;
        std::string phrase;
    };
    keplershm_estimate bad_watts = node_row(0, 1.0);
    bad_watts.power_watts = 2e6;
    const std::vector<Case> cases = {
        {{node_row(0, 10.0), node_row(2, nan)}, "row 1: energy_joules nan"},
        {{node_row(0, -1.0)}, "row 0: energy_joules -1"},
        {{node_row(0, inf)}, "not a finite non-negative number"},
        {{process_row(7, 1, nan)}, "row 0: energy_joules nan"},  // per-process rows are checked too
        {{bad_watts}, "power_watts 2000000"},
        {{node_row(4, 1.0)}, "row 0: zone_index 4 but the estimates segment declares 4 zone(s)"},
        {{node_row(0xfffffffe, 1.0)}, "zone_index 4294967294"},
        {{node_row(0, 1.0), node_row(0, 2.0)}, "row 1: a second row for zone 0x0"},
        {{node_row(kNoIndex, 1.0), node_row(kNoIndex, 2.0)}, "a second row for zone 0xffffffff"},
        {{node_row(kNoIndex, 1.0), node_row(3, 2.0)}, "both a whole-node row and a platform zone row"},
        {{process_row(7, 1, 2.0)}, "no node or zone rows"},
        {{}, "no node or zone rows"},
    };
    for (const Case& c : cases) {
        EXPECT_NE(rejection(rt.parse(5, 9, c.rows)).find(c.phrase), std::string::npos)
            << "wanted \"" << c.phrase << "\", got: " << rejection(rt.parse(5, 9, c.rows));
    }
    EXPECT_NE(rejection(rt.parse(0, 9, {node_row(0, 1.0)})).find("answers no collector frame"), std::string::npos);
    EXPECT_NE(rejection(rt.parse(5, 0, {node_row(0, 1.0)})).find("answers no collector frame"), std::string::npos);
}

TEST(ParseAnswer, UnknownZoneKindIsRefused) {
    keplershm_zone_info odd = zone_info("odd", 99, 0);
    Roundtrip rt(estimates_options({odd}));
    EXPECT_NE(rejection(rt.parse(1, 1, {node_row(0, 1.0)})).find("zone 0 has unknown kind 99"), std::string::npos);
}

TEST(ParseAnswer, HugeRowCountsAreRefusedBeforeTheRowsAreRead) {
    Roundtrip rt(estimates_options({}, "big", "v1", kMaxAnswerRows + 10));
    std::vector<keplershm_estimate> rows(kMaxAnswerRows + 1, process_row(1, 1, 0.0));
    rows[0] = node_row(kNoIndex, 1.0);
    EXPECT_NE(rejection(rt.parse(1, 1, rows)).find("65537 rows, more than the 65536 accepted"), std::string::npos);
}

TEST(ParseAnswer, ACollectorSegmentIsNotAnEstimatesSegment) {
    Feed collector(node_options(4, kProcfsMetrics));
    const keplershm::FrameView& frame = collector.frame(simple_frame(1'000'000'000, 1'000'000'000, {1000}));
    EXPECT_NE(rejection(parse_answer(frame)).find("kind 1 (collector frames), not an estimates segment"), std::string::npos);
}

// --- matching -------------------------------------------------------------------------------------

namespace {

const SteadyClock::time_point t0{};

Arrival arrival(FrameId frame, double at_s, double joules = 10.0) {
    EstimatesAnswer a;
    a.frame = frame;
    a.zones = {{ZoneKind::package, joules}};
    return Arrival{a, t0 + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(at_s))};
}

SteadyClock::time_point at(double s) {
    return t0 + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

TEST(AnswerMatcher, ReadyOnTimeLateAndMissing) {
    AnswerMatcher m(MatcherOptions{.window_frames = 4, .max_early = 8, .timed = true});
    // Frame 1: the answer is there when it is estimated.
    m.begin_frame({9, 1}, at(1.0), 1.0);
    m.add(arrival({9, 1}, 1.01));
    ASSERT_TRUE(m.take_current());
    // Frame 2: its answer comes 0.4 s after it was read (on time), frame 3's 1.5 s after (late).
    m.begin_frame({9, 2}, at(2.0), 1.0);
    EXPECT_FALSE(m.take_current());
    m.begin_frame({9, 3}, at(3.0), 1.0);
    m.add(arrival({9, 2}, 2.4));
    auto matched = m.take_matched();
    ASSERT_EQ(matched.size(), 1u);
    EXPECT_EQ(matched[0].frame, (FrameId{9, 2}));
    EXPECT_FALSE(matched[0].late);
    EXPECT_NEAR(matched[0].lag_s, 0.4, 1e-6);
    EXPECT_TRUE(m.keeping_up());  // frame 2 was answered on time
    m.begin_frame({9, 4}, at(4.0), 1.0);
    EXPECT_FALSE(m.keeping_up());  // frame 3 has no answer yet
    m.add(arrival({9, 3}, 4.5));
    matched = m.take_matched();
    ASSERT_EQ(matched.size(), 1u);
    EXPECT_TRUE(matched[0].late);
    EXPECT_NEAR(*m.last_lag_s(), 1.5, 1e-6);
    // Frames 4..6 never get an answer: each is counted missing when it leaves the 4-frame window.
    for (uint64_t n = 5; n <= 10; ++n) m.begin_frame({9, n}, at(static_cast<double>(n)), 1.0);
    EXPECT_EQ(m.counts().answers, 3u);
    EXPECT_EQ(m.counts().used, 1u);
    EXPECT_EQ(m.counts().late, 1u);
    EXPECT_EQ(m.counts().missing, 3u);  // frames 4, 5, 6 left the window (7..10 remain)
    EXPECT_EQ(m.counts().rejected, 0u);
}

TEST(AnswerMatcher, DuplicatesForgottenAndUnknownFramesAreRejected) {
    AnswerMatcher m(MatcherOptions{.window_frames = 3, .max_early = 2, .timed = true});
    for (uint64_t n = 1; n <= 5; ++n) m.begin_frame({7, n}, at(static_cast<double>(n)), 1.0);
    m.add(arrival({7, 5}, 5.0));
    m.add(arrival({7, 5}, 5.1));  // twice
    EXPECT_EQ(m.counts().rejected, 1u);
    EXPECT_EQ(m.last_rejection(), "second answer for a frame: ignored");
    m.add(arrival({7, 1}, 5.2));  // left the window
    EXPECT_EQ(m.counts().rejected, 2u);
    EXPECT_NE(m.last_rejection().find("no longer remembers (it keeps the last 3)"), std::string::npos);
    const auto rejections = m.take_rejections();
    ASSERT_EQ(rejections.size(), 2u);
    EXPECT_EQ(rejections[0].first, (FrameId{7, 5}));
    EXPECT_EQ(rejections[1].first, (FrameId{7, 1}));
    EXPECT_TRUE(m.take_rejections().empty());
    // A generation never read and a far-future sequence wait as "early" answers, then expire.
    m.add(arrival({0xdead, 3}, 5.3));
    m.add(arrival({7, 1'000'000'000}, 5.3));
    m.add(arrival({0xbeef, 1}, 5.3));  // the early buffer holds two: the oldest is refused at once
    EXPECT_EQ(m.counts().rejected, 3u);
    EXPECT_EQ(m.last_rejection(), "answer for a frame this estimator never read");
    for (uint64_t n = 6; n <= 9; ++n) m.begin_frame({7, n}, at(static_cast<double>(n)), 1.0);
    EXPECT_EQ(m.counts().rejected, 5u);
    EXPECT_EQ(m.counts().answers, 1u);
}

TEST(AnswerMatcher, AnAnswerThatCameBeforeItsFrameIsReady) {
    AnswerMatcher m;
    m.begin_frame({3, 1}, at(1.0), 1.0);
    m.add(arrival({3, 2}, 1.2, 42.0));  // the producer read frame 2 before the estimator did
    EXPECT_FALSE(m.take_current());
    m.begin_frame({3, 2}, at(2.0), 1.0);
    const auto current = m.take_current();
    ASSERT_TRUE(current);
    EXPECT_DOUBLE_EQ(current->zones.at(0).second, 42.0);
    EXPECT_EQ(*m.last_lag_s(), 0.0);
    EXPECT_EQ(m.counts().used, 1u);
}

TEST(AnswerMatcher, ImplausiblePowerOverTheFramesIntervalIsRejected) {
    AnswerMatcher m;
    m.begin_frame({3, 1}, at(1.0), 0.001);  // a 1 ms interval: 2000 J would be 2 MW
    m.add(arrival({3, 1}, 1.0, 2000.0));
    EXPECT_FALSE(m.take_current());
    EXPECT_EQ(m.counts().rejected, 1u);
    EXPECT_NE(m.last_rejection().find("above 1000000 W"), std::string::npos) << m.last_rejection();
}

TEST(AnswerMatcher, RecordingsHaveNoLateAnswers) {
    AnswerMatcher m(MatcherOptions{.window_frames = 4, .max_early = 8, .timed = false});
    m.begin_frame({3, 1}, at(1.0), 1.0);
    m.begin_frame({3, 2}, at(2.0), 1.0);
    m.add(arrival({3, 1}, 900.0));
    ASSERT_EQ(m.take_matched().size(), 1u);
    EXPECT_EQ(m.counts().late, 0u);
    EXPECT_EQ(*m.last_lag_s(), 0.0);
}
