// The feed follows the collector across a restart (a new generation) on an open subscription, and a
// restarted feed serves the frames the ring still holds to a subscriber that resumes from its sequence.
#include <gtest/gtest.h>

#include "support/feed_fixture.hpp"

namespace feed_test {
namespace {

TEST(Restart, CollectorRestartIsFollowedOnAnOpenSubscription) {
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("feed-restart");
    auto collector = start_collector(tmp, name);
    Feed feed(tmp, name);
    ASSERT_NE(feed.port(), 0) << feed.log();
    auto stub = connect(feed.target());
    ASSERT_TRUE(wait_for_frames(*stub)) << feed.log();
    Stream stream = subscribe(*stub, request_for({"zones", "unaccounted"}));
    v1::Frame frame;
    ASSERT_TRUE(stream.read(frame));
    const uint64_t first_generation = frame.generation();

    collector->stop();  // clean stop: the segment is retired
    collector = start_collector(tmp, name, "100ms", "collect2.log");
    bool described = false;
    while (frame.generation() == first_generation) {
        ASSERT_TRUE(stream.read(frame)) << stream.finish().error_message() << feed.log();
    }
    described = frame.has_segment() && frame.segment().generation() == frame.generation();
    EXPECT_TRUE(described) << "the first frame of a new generation describes it";
    v1::Description d;
    ASSERT_TRUE(describe(*stub, d).ok());
    EXPECT_GE(d.stats().generations_followed(), 1u);
    EXPECT_EQ(d.segment().generation(), frame.generation());
}

TEST(Restart, RestartedFeedResumesFromASequence) {
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("feed-resume");
    auto collector = start_collector(tmp, name, "250ms");  // 64 slots: 16 s of frames held
    uint64_t last = 0;
    {
        Feed feed(tmp, name);
        ASSERT_NE(feed.port(), 0) << feed.log();
        auto stub = connect(feed.target());
        Stream stream = subscribe(*stub, request_for({"processes:pid,cpu_time_ns"}));
        v1::Frame frame;
        for (int i = 0; i < 3; ++i) ASSERT_TRUE(stream.read(frame)) << stream.finish().error_message() << feed.log();
        last = frame.sequence();
        feed.child().stop();
        EXPECT_FALSE(stream.read(frame)) << "the stream ends with the feed";
        const grpc::Status s = stream.finish();
        EXPECT_TRUE(s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::CANCELLED)
            << s.error_code() << " " << s.error_message();
    }
    Feed feed(tmp, name, {}, "feed2.log");
    ASSERT_NE(feed.port(), 0) << feed.log();
    auto stub = connect(feed.target());
    v1::SubscribeRequest request = request_for({"processes:pid,cpu_time_ns"});
    request.set_from_sequence(last + 1);
    Stream stream = subscribe(*stub, request);
    v1::Frame frame;
    ASSERT_TRUE(stream.read(frame)) << stream.finish().error_message() << feed.log();
    EXPECT_EQ(frame.sequence() - frame.start_gap(), last + 1);
    EXPECT_EQ(frame.sequence(), last + 1) << "the ring still held it: no gap";
    ASSERT_TRUE(stream.read(frame));
    EXPECT_EQ(frame.sequence(), last + 2 + frame.missed());
}

TEST(Restart, FeedStartedBeforeTheCollectorWaitsForIt) {
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("feed-early");
    Feed feed(tmp, name);
    ASSERT_NE(feed.port(), 0) << feed.log();
    auto stub = connect(feed.target());
    v1::Description d;
    ASSERT_TRUE(describe(*stub, d).ok());
    EXPECT_FALSE(d.attached());
    EXPECT_GT(d.sections_size(), 0) << "the library's schema describes what can be selected";
    v1::SubscribeRequest resume = request_for({"zones"});
    resume.set_from_sequence(5);
    EXPECT_EQ(refused(*stub, resume).error_code(), grpc::StatusCode::UNAVAILABLE) << "no frame held yet: retry later";

    Stream stream = subscribe(*stub, request_for({"zones", "unaccounted"}));
    auto collector = start_collector(tmp, name);
    v1::Frame frame;
    ASSERT_TRUE(stream.read(frame)) << stream.finish().error_message() << feed.log();
    EXPECT_TRUE(frame.has_segment());
    ASSERT_TRUE(describe(*stub, d).ok());
    EXPECT_TRUE(d.attached());
}

}  // namespace
}  // namespace feed_test
