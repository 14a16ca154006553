// keplershm::Follower, a daemon's reader of a live name: it waits for the segment and says so once, reads
// every frame in order from the newest (a monitor) or from the oldest the ring holds (a relay), tells
// when the writer retires and when a successor's new generation is followed, and steps over a corrupt
// frame with the reason instead of stopping.
#include <gtest/gtest.h>

#include <algorithm>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "keplershm/follower.hpp"
#include "test_support.hpp"

namespace keplershm {
namespace {

using test::ScopedName;
using namespace std::chrono_literals;
using Kind = FollowerEvent::Kind;

/// What a follower told its owner, in order.
struct Told {
    std::vector<FollowerEvent> events;
    Follower::EventSink sink() {
        return [this](const FollowerEvent& event) { events.push_back(event); };
    }
    [[nodiscard]] size_t count(Kind kind) const {
        return static_cast<size_t>(std::count_if(events.begin(), events.end(), [&](const auto& e) { return e.kind == kind; }));
    }
    [[nodiscard]] const FollowerEvent* last(Kind kind) const {
        const auto it = std::find_if(events.rbegin(), events.rend(), [&](const auto& e) { return e.kind == kind; });
        return it == events.rend() ? nullptr : &*it;
    }
};

/// Sequences the follower hands out until it has nothing new within `wait`.
std::vector<uint64_t> read_all(Follower& follower, std::chrono::milliseconds wait = 0ms) {
    std::vector<uint64_t> sequences;
    FrameView view;
    while (follower.next(view, wait) == Follower::Result::frame) sequences.push_back(view.sequence());
    return sequences;
}

TEST(Follower, WaitsForTheSegmentSayingSoOnceThenReadsEveryFrameInOrder) {
    ScopedName name("follow");
    Told told;
    Follower follower(name, {}, told.sink());
    FrameView view;
    EXPECT_EQ(follower.next(view, 0ms), Follower::Result::idle);
    EXPECT_EQ(follower.next(view, 0ms), Follower::Result::idle);
    EXPECT_EQ(follower.reader(), nullptr);
    ASSERT_EQ(told.count(Kind::waiting), 1u) << "once, not once per call";
    EXPECT_NE(told.last(Kind::waiting)->message.find("waiting for segment '" + name.str() + "' ("), std::string::npos)
        << told.last(Kind::waiting)->message;

    Writer writer(name, test::small_options());
    test::publish(writer, 1);
    ASSERT_EQ(follower.next(view, 1000ms), Follower::Result::frame);
    EXPECT_EQ(view.sequence(), 1u);
    ASSERT_NE(told.last(Kind::reading), nullptr);
    EXPECT_EQ(told.last(Kind::reading)->message, "reading segment '" + name.str() + "'");
    test::publish(writer, 2);
    EXPECT_EQ(read_all(follower), (std::vector<uint64_t>{2, 3}));
    EXPECT_EQ(follower.info().latest_sequence, 3u);
    EXPECT_EQ(follower.rejected_frames(), 0u);
}

TEST(Follower, StartsAtTheNewestFrameOrAtTheOldestTheRingStillHolds) {
    ScopedName name("follow");
    Writer writer(name, test::small_options());  // 4 slots
    test::publish(writer, 7);

    Follower monitor(name, {}, nullptr);
    EXPECT_EQ(read_all(monitor), (std::vector<uint64_t>{7}));

    ReaderOptions relay_options;
    relay_options.start = ReaderOptions::Start::oldest_held;
    Follower relay(name, relay_options, nullptr);
    FrameView view;
    ASSERT_EQ(relay.next(view, 0ms), Follower::Result::frame);
    EXPECT_EQ(view.sequence(), 4u) << "the 4 slots hold frames 4..7";
    EXPECT_EQ(view.missed(), 0u) << "frames before the ring were never this reader's to lose";
    EXPECT_EQ(read_all(relay), (std::vector<uint64_t>{5, 6, 7}));
    test::publish(writer, 1);
    EXPECT_EQ(read_all(relay), (std::vector<uint64_t>{8}));
    EXPECT_EQ(read_all(monitor), (std::vector<uint64_t>{8}));
}

TEST(Follower, TellsWhenTheWriterRetiresAndFollowsItsSuccessor) {
    ScopedName name("follow");
    Told told;
    Follower follower(name, {}, told.sink());
    auto writer = std::make_unique<Writer>(name, test::small_options());
    test::publish(*writer, 2);
    EXPECT_EQ(read_all(follower), (std::vector<uint64_t>{2}));

    writer.reset();  // a clean stop
    EXPECT_TRUE(read_all(follower, 100ms).empty());
    ASSERT_EQ(told.count(Kind::retired), 1u);
    EXPECT_NE(told.last(Kind::retired)->message.find("stopped cleanly"), std::string::npos);
    EXPECT_TRUE(read_all(follower).empty());
    EXPECT_EQ(told.count(Kind::retired), 1u) << "once per change, not once per call";

    Writer successor(name, test::small_options());
    test::publish(successor, 3);
    FrameView view;
    for (int tries = 0; tries < 50 && follower.next(view, 100ms) != Follower::Result::frame; ++tries) {
    }
    EXPECT_EQ(view.generation(), successor.generation());
    EXPECT_EQ(follower.reattaches(), 1u);
    ASSERT_EQ(told.count(Kind::new_generation), 1u);
    EXPECT_NE(told.last(Kind::new_generation)->message.find(fmt::format("{:#x}", successor.generation())),
              std::string::npos)
        << told.last(Kind::new_generation)->message;
    EXPECT_FALSE(told.last(Kind::new_generation)->warning);
}

TEST(Follower, StepsOverACorruptFrameWithTheReasonAndReadsOn) {
    ScopedName name("follow");
    Writer writer(name, test::small_options());
    test::publish(writer, 1);
    Told told;
    Follower follower(name, {}, told.sink());
    EXPECT_EQ(read_all(follower), (std::vector<uint64_t>{1}));

    // Frame 2's first section starts past its slot, as a broken or hostile writer might publish it.
    test::publish(writer, 1);
    const keplershm_header& h = writer.header();
    const uint64_t frame = h.slots_offset + (2 % h.slot_count) * h.slot_size + KEPLERSHM_SLOT_CONTROL_SIZE;
    const uint32_t past_the_slot = 0xFFFFFFF0u;
    const int fd = open(("/dev/shm/" + name.str()).c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, &past_the_slot, sizeof past_the_slot,
                     static_cast<off_t>(frame + h.frame_header_size + 16 + 8)), 4);  // sections[0].offset
    close(fd);
    test::publish(writer, 1);

    FrameView view;
    EXPECT_EQ(follower.next(view, 0ms), Follower::Result::idle);
    EXPECT_EQ(follower.rejected_frames(), 1u);
    ASSERT_NE(told.last(Kind::rejected_frame), nullptr);
    EXPECT_TRUE(told.last(Kind::rejected_frame)->warning);
    EXPECT_NE(told.last(Kind::rejected_frame)->message.find("frame 2"), std::string::npos)
        << told.last(Kind::rejected_frame)->message;
    EXPECT_EQ(read_all(follower), (std::vector<uint64_t>{3}));
}

}  // namespace
}  // namespace keplershm
