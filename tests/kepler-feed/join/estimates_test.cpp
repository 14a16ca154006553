// Estimates joined to the frames (kepler-feed --estimates): the real collector, the real kepler-estimate
// publishing its answers (--publish-estimates), the real feed and a real gRPC client. Answers on the feed
// equal the local estimates segment's for the same (generation, sequence); without section "estimates"
// none are sent; an absent or stopped producer never holds frames beyond the bound and they say missing.
#include <gtest/gtest.h>

#include <csignal>

#include "support/feed_fixture.hpp"

namespace feed_test {
namespace {

constexpr auto kInterval = "400ms";  // the wait is min(--estimates-wait, interval / 4) = 100 ms

/// Every frame must reach the client this soon after its interval ended (collector's CLOCK_REALTIME, the
/// same host): the 100 ms bound plus a wide margin for a loaded machine. Generous on purpose.
constexpr uint64_t kLatencyLimitNs = 3'000'000'000;

uint64_t realtime_ns() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::system_clock::now().time_since_epoch()).count());
}

class Estimates : public ::testing::Test {
protected:
    /// The collector, kepler-estimate publishing as `prefix_`, and a feed joining `sources` to the frames.
    void start(const std::vector<std::string>& sources, bool estimator = true) {
        collector_ = start_collector(tmp_, name_, kInterval);
        if (estimator) {
            estimator_ = std::make_unique<Daemon>(
                std::vector<std::string>{ESTIMATE_BINARY, "--shm-name", name_, "--listen", "none", "--publish-estimates", prefix_},
                tmp_ / "estimate.log");
        }
        std::vector<std::string> args{"--estimates-wait", "250"};
        for (const std::string& s : sources) args.insert(args.end(), {"--estimates", s});
        feed_ = std::make_unique<Feed>(tmp_, name_, args);
        ASSERT_NE(feed_->port(), 0) << feed_->log();
        stub_ = connect(feed_->target());
        ASSERT_TRUE(wait_for_frames(*stub_)) << feed_->log() << collector_->log();
    }

    /// Reads a frame and checks it arrived within the bound of its interval's end.
    void read_in_time(Stream& stream, v1::Frame& frame) {
        ASSERT_TRUE(stream.read(frame)) << stream.finish().error_message() << feed_->log();
        const uint64_t end = frame.header().interval_end_realtime_ns(), now = realtime_ns();
        EXPECT_LT(now > end ? now - end : 0, kLatencyLimitNs) << "frame " << frame.sequence() << " was held";
    }

    std::string logs() { return feed_->log() + (estimator_ ? estimator_->log() : ""); }

    e2e::TempDir tmp_;
    std::string name_ = e2e::unique_name("feed-est");
    std::string prefix_ = e2e::unique_name("feed-pub");
    std::unique_ptr<Daemon> collector_;
    std::unique_ptr<Daemon> estimator_;
    std::unique_ptr<Feed> feed_;
    std::unique_ptr<v1::Feed::Stub> stub_;
};

TEST_F(Estimates, AnswersOnTheFeedEqualTheLocalSegmentForTheSameFrame) {
    const std::string curve = prefix_ + "-curve";
    ASSERT_NO_FATAL_FAILURE(start({curve, prefix_ + "-measured"}));  // no meter here: `measured` never answers
    Stream stream = subscribe(*stub_, request_for({"zones", "workloads", "estimates"}));
    std::unique_ptr<LocalReader> local;
    int compared = 0;
    for (int n = 0; n < 60 && compared < 5; ++n) {
        v1::Frame frame;
        ASSERT_NO_FATAL_FAILURE(read_in_time(stream, frame));
        ASSERT_EQ(frame.estimates_size(), 2) << "one entry per --estimates source, in order";
        EXPECT_EQ(frame.estimates(1).shm_name(), prefix_ + "-measured");
        EXPECT_TRUE(frame.estimates(1).missing());
        const v1::ModelEstimates& e = frame.estimates(0);
        EXPECT_EQ(e.shm_name(), curve);
        if (e.missing()) continue;  // e.g. the collector's first frame, which has no CPU deltas to estimate from
        if (!local) local = std::make_unique<LocalReader>(curve);
        ASSERT_NE(local->reader, nullptr);
        keplershm_view view{};
        view.sz = sizeof view;
        ASSERT_EQ(keplershm_reader_copy(local->reader, e.sequence(), &view), KEPLERSHM_OK) << e.sequence();
        EXPECT_EQ(view.generation, e.generation());
        EXPECT_EQ(view.frame->producer_generation, frame.generation()) << "matched on generation and sequence";
        EXPECT_EQ(view.frame->producer_sequence, frame.sequence());
        EXPECT_EQ(e.model(), "curve");
        EXPECT_EQ(e.version(), "curve");
        ASSERT_EQ(e.zones_size(), 1);
        EXPECT_EQ(e.zones(0).kind(), static_cast<uint32_t>(KEPLERSHM_ZONE_PACKAGE));
        // The primary's answer: its zone row and one row per workload of the frame and zone. How many
        // workloads a procfs frame has depends on which processes ran in its interval (maybe none).
        const v1::Section* workloads = find_section(frame, "workloads");
        ASSERT_NE(workloads, nullptr);
        EXPECT_EQ(e.rows().rows(), 1u + workloads->rows()) << "frame " << frame.sequence();
        EXPECT_EQ(compare_section(e.rows(), local->reader, view), "") << "frame " << frame.sequence();
        ++compared;
    }
    EXPECT_EQ(compared, 5) << logs();
    v1::Description d;
    ASSERT_TRUE(describe(*stub_, d).ok());
    ASSERT_EQ(d.estimates_sources_size(), 2);
    EXPECT_TRUE(d.estimates_sources(0).attached());
    EXPECT_EQ(d.estimates_sources(0).model(), "curve");
    EXPECT_GE(d.estimates_sources(0).answers(), 5u);
    EXPECT_EQ(d.estimates_sources(0).rejected(), 0u) << d.estimates_sources(0).last_rejection();
    EXPECT_FALSE(d.estimates_sources(1).attached());
    EXPECT_GT(d.stats().estimates_missing(), 0u);
    EXPECT_EQ(d.estimates_wait_ms(), 250u);
}

TEST_F(Estimates, WithoutSectionEstimatesNoneAreSent) {
    ASSERT_NO_FATAL_FAILURE(start({prefix_ + "-curve"}));
    Stream stream = subscribe(*stub_, request_for({"zones"}));
    for (int n = 0; n < 3; ++n) {
        v1::Frame frame;
        ASSERT_NO_FATAL_FAILURE(read_in_time(stream, frame));
        EXPECT_EQ(frame.estimates_size(), 0);
    }
}

TEST_F(Estimates, FieldsAndWorkloadFiltersApplyToTheAnswersRows) {
    ASSERT_NO_FATAL_FAILURE(start({prefix_ + "-curve"}));
    v1::SubscribeRequest request = request_for({"workloads:pod_namespace", "estimates:zone_index,workload_index,power_watts"});
    request.mutable_filter()->add_namespaces("no-such-namespace");
    Stream stream = subscribe(*stub_, request);
    v1::Frame frame;
    for (int n = 0; n < 60; ++n) {
        ASSERT_NO_FATAL_FAILURE(read_in_time(stream, frame));
        if (!frame.estimates(0).missing()) break;
    }
    const v1::ModelEstimates& e = frame.estimates(0);
    ASSERT_FALSE(e.missing()) << logs();
    ASSERT_EQ(e.rows().columns_size(), 3);
    EXPECT_EQ(e.rows().columns(0).name(), "zone_index");
    EXPECT_EQ(e.rows().columns(2).name(), "power_watts");
    EXPECT_EQ(find_section(frame, "workloads")->rows(), 0u);
    EXPECT_EQ(e.rows().rows(), static_cast<uint32_t>(e.zones_size())) << "the rows of workloads left out are left out";
    for (const uint32_t w : e.rows().columns(1).u32()) EXPECT_EQ(w, 0xffffffffu);
}

TEST_F(Estimates, AnAbsentProducerNeverHoldsFramesAndTheySayMissing) {
    ASSERT_NO_FATAL_FAILURE(start({prefix_ + "-curve"}, /*estimator=*/false));
    Stream stream = subscribe(*stub_, request_for({"zones", "estimates"}));
    uint64_t previous = 0;
    for (int n = 0; n < 8; ++n) {
        v1::Frame frame;
        ASSERT_NO_FATAL_FAILURE(read_in_time(stream, frame));
        ASSERT_EQ(frame.estimates_size(), 1);
        EXPECT_TRUE(frame.estimates(0).missing());
        EXPECT_FALSE(frame.estimates(0).reason().empty());
        EXPECT_EQ(frame.estimates(0).rows().rows(), 0u);
        if (previous != 0) {
            EXPECT_EQ(frame.sequence(), previous + 1 + frame.missed()) << "no frame is skipped either";
        }
        previous = frame.sequence();
    }
}

TEST_F(Estimates, AStoppedProducerCostsTheBoundAtMostAndFramesSayMissing) {
    ASSERT_NO_FATAL_FAILURE(start({prefix_ + "-curve"}));
    Stream stream = subscribe(*stub_, request_for({"estimates"}));
    v1::Frame frame;
    for (int n = 0; n < 60; ++n) {  // until the producer answers
        ASSERT_NO_FATAL_FAILURE(read_in_time(stream, frame));
        if (!frame.estimates(0).missing()) break;
    }
    ASSERT_FALSE(frame.estimates(0).missing()) << logs();
    estimator_->signal(SIGSTOP);  // alive (its segment is not retired) but silent
    int missing = 0;
    for (int n = 0; n < 6; ++n) {
        ASSERT_NO_FATAL_FAILURE(read_in_time(stream, frame));
        missing += frame.estimates(0).missing() ? 1 : 0;
    }
    estimator_->signal(SIGCONT);
    EXPECT_GE(missing, 5) << "answers already published before the stop may still come: at most one";
}

}  // namespace
}  // namespace feed_test
