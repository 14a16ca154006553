// Crash and restart: a writer SIGKILLed in the middle of a frame is reported by readers within the
// heartbeat timeout; a new writer takes the name; the same reader objects continue on the new generation.
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace keplershm {
namespace {

using test::ScopedName;
using namespace std::chrono_literals;

TEST(Crash, ReadersSeeADeadWriterAndFollowItsSuccessor) {
    ScopedName name("crash");
    WriterOptions options = test::small_options();
    options.heartbeat_period = 50ms;
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t writer_process = test::spawn([&] {
        Writer writer(name, options);
        for (int i = 0; i < 10; ++i) {
            Draft draft = writer.begin();
            test::fill_derived_frame(draft);
            writer.commit(draft);
        }
        Draft half = writer.begin();  // frame 11: started, never committed
        test::fill_derived_frame(half);
        const char byte = 1;
        (void)write(ready[1], &byte, 1);
        pause();  // SIGKILLed here, in the middle of frame 11
        return 0;
    });
    char byte = 0;
    ASSERT_EQ(read(ready[0], &byte, 1), 1);

    ReaderOptions reader_options;
    reader_options.heartbeat_timeout = 300ms;
    Reader copying = Reader::open(name, reader_options);
    Reader in_place = Reader::open(name, reader_options);
    FrameView view;
    ASSERT_EQ(copying.next(0ms, view), Status::ok);
    EXPECT_EQ(view.sequence(), 10u);
    EXPECT_EQ(in_place.acquire(11, view), Status::not_yet);  // half-written: never handed out

    kill(writer_process, SIGKILL);
    EXPECT_EQ(test::reap(writer_process), -SIGKILL);
    const auto before = std::chrono::steady_clock::now();
    EXPECT_EQ(copying.next(2000ms, view), Status::writer_gone);
    const auto noticed = std::chrono::steady_clock::now() - before;
    EXPECT_LT(noticed, 1500ms);  // the bound is the feature: the 300 ms heartbeat timeout, not the 2 s wait
    EXPECT_EQ(in_place.wait(10, 0ms), Status::writer_gone);

    // The successor takes the name once it has watched the dead heartbeat stand still for 3 × 50 ms + 1 s.
    Writer successor(name, options);
    EXPECT_EQ(successor.header().first_sequence, 11u);
    for (int i = 0; i < 3; ++i) {
        Draft draft = successor.begin();
        test::fill_derived_frame(draft);
        successor.commit(draft);
    }
    ASSERT_EQ(copying.next(2000ms, view), Status::ok);
    EXPECT_EQ(view.sequence(), 11u);
    EXPECT_EQ(view.missed(), 0u);  // frame 11 of the dead writer was never published: nothing lost
    EXPECT_TRUE(test::derived_frame_intact(view));
    EXPECT_EQ(view.generation(), successor.generation());
    EXPECT_EQ(copying.info().reattach_count, 1u);

    EXPECT_EQ(in_place.wait(10, 2000ms), Status::ok);
    ASSERT_EQ(in_place.acquire(13, view), Status::ok);
    EXPECT_TRUE(in_place.validate(view));
    EXPECT_TRUE(test::derived_frame_intact(view));
}

TEST(Crash, AReaderCrashLeavesNothingBehind) {
    ScopedName name("crash");
    Writer writer(name, test::small_options());
    const pid_t reader_process = test::spawn([&] {
        Reader reader = Reader::open(name);
        FrameView view;
        (void)reader.wait(0, 5000ms);
        raise(SIGKILL);
        return 0;
    });
    usleep(50'000);
    Draft draft = writer.begin();
    test::fill_derived_frame(draft);
    writer.commit(draft);
    EXPECT_EQ(test::reap(reader_process), -SIGKILL);
    for (int i = 0; i < 10; ++i) {  // the writer goes on as if nothing happened
        draft = writer.begin();
        test::fill_derived_frame(draft);
        writer.commit(draft);
    }
    EXPECT_EQ(writer.latest_sequence(), 11u);
    EXPECT_NO_THROW(writer.heartbeat());
}

}  // namespace
}  // namespace keplershm
