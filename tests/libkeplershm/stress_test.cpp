// Multi-process stress: one writer process publishes as fast as it can; two reader processes (in place +
// validate, and copy-out) check every frame they accept against its sequence-derived content and
// checksum. Zero torn frames allowed. Bounded by KEPLERSHM_STRESS_SECONDS (default 10); the long mode
// KEPLERSHM_STRESS_READS=100000000 runs until the in-place reader has done that many reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "seqlock.hpp"
#include "test_support.hpp"

#include <thread>

namespace keplershm {
namespace {

using test::ScopedName;
using namespace std::chrono_literals;

struct Counts {
    uint64_t accepted = 0;
    uint64_t torn = 0;
    uint64_t rejected = 0;  // lapped or invalidated: correctly thrown away
    uint64_t missed = 0;
};

uint64_t env_u64(const char* name, uint64_t fallback) {
    const char* value = std::getenv(name);
    return value != nullptr ? std::strtoull(value, nullptr, 10) : fallback;
}

int in_place_reader(const std::string& name, uint64_t target_reads, int report_fd) {
    Reader reader = Reader::open(name);
    Counts c;
    uint64_t reads = 0;
    while (reader.info().state == KEPLERSHM_STATE_ACTIVE || reads == 0) {
        const uint64_t newest = reader.latest();
        // Read the newest frame and, every 8th time, an older one the writer is about to reuse.
        const uint64_t n = (reads % 8 == 7 && newest > 2) ? newest - 2 : newest;
        FrameView view;
        ++reads;
        if (n == 0 || reader.acquire(n, view) != Status::ok) {
            ++c.rejected;
            continue;
        }
        const bool intact = test::derived_frame_intact(view);  // reads every field in place
        if (!reader.validate(view)) {
            ++c.rejected;
            continue;
        }
        ++c.accepted;
        if (!intact) ++c.torn;
        if (target_reads != 0 && reads >= target_reads) break;
    }
    (void)write(report_fd, &c, sizeof c);
    return c.torn == 0 && c.accepted > 0 ? 0 : 1;
}

int copy_reader(const std::string& name, int report_fd) {
    Reader reader = Reader::open(name);
    Counts c;
    FrameView view;
    for (;;) {
        const Status status = reader.next(1000ms, view);
        if (status != Status::ok) break;
        ++c.accepted;
        c.missed += view.missed();
        if (!test::derived_frame_intact(view)) ++c.torn;
    }
    (void)write(report_fd, &c, sizeof c);
    return c.torn == 0 && c.accepted > 0 ? 0 : 1;
}

TEST(Stress, NoTornFramesAcrossProcesses) {
    const uint64_t seconds = env_u64("KEPLERSHM_STRESS_SECONDS", 10);
    const uint64_t target_reads = env_u64("KEPLERSHM_STRESS_READS", 0);
    ScopedName name("stress");
    WriterOptions options = test::small_options();
    options.slot_count = 4;  // small ring: readers get lapped often, the hard case
    auto writer = std::make_unique<Writer>(name, options);
    int pipes[2][2];
    ASSERT_EQ(pipe(pipes[0]), 0);
    ASSERT_EQ(pipe(pipes[1]), 0);
    const pid_t a = test::spawn([&] { return in_place_reader(name, target_reads, pipes[0][1]); });
    const pid_t b = test::spawn([&] { return copy_reader(name, pipes[1][1]); });
    close(pipes[0][1]);  // a reader that dies without reporting then reads as end of file, not a hang
    close(pipes[1][1]);

    const auto start = std::chrono::steady_clock::now();
    uint64_t published = 0;
    for (;;) {
        Draft draft = writer->begin();
        test::fill_derived_frame(draft);
        writer->commit(draft);
        ++published;
        if (published % 4096 == 0) {
            const auto elapsed = std::chrono::steady_clock::now() - start;
            const bool time_up = target_reads == 0 && elapsed > std::chrono::seconds(seconds);
            int status = 0;
            const bool reader_done = target_reads != 0 && waitpid(a, &status, WNOHANG) == a;
            if (time_up || reader_done) {
                if (reader_done) {
                    ASSERT_EQ(WEXITSTATUS(status), 0);
                }
                break;
            }
        }
    }
    writer.reset();  // retire: readers stop
    if (target_reads == 0) {
        EXPECT_EQ(test::reap(a), 0);
    }
    EXPECT_EQ(test::reap(b), 0);
    Counts in_place;
    Counts copied;
    ASSERT_EQ(read(pipes[0][0], &in_place, sizeof in_place), static_cast<ssize_t>(sizeof in_place));
    ASSERT_EQ(read(pipes[1][0], &copied, sizeof copied), static_cast<ssize_t>(sizeof copied));
    std::printf("published %lu frames\n", published);
    std::printf("in-place reader: accepted %lu, torn %lu, rejected (lapped/invalidated) %lu\n", in_place.accepted,
                in_place.torn, in_place.rejected);
    std::printf("copy reader:     accepted %lu, torn %lu, missed %lu\n", copied.accepted, copied.torn, copied.missed);
    EXPECT_EQ(in_place.torn, 0u);
    EXPECT_EQ(copied.torn, 0u);
    EXPECT_GT(in_place.accepted, 0u);
    EXPECT_GT(copied.accepted, 0u);
}

// The same race between threads of one process, so ThreadSanitizer (which cannot see across processes)
// checks the orderings: the TSan build runs this test.
TEST(Stress, NoTornFramesAcrossThreads) {
    const uint64_t seconds = std::min<uint64_t>(env_u64("KEPLERSHM_STRESS_SECONDS", 10), 5);
    ScopedName name("stress-threads");
    Writer writer(name, test::small_options());
    std::atomic<bool> stop{false};
    Counts in_place;
    Counts copied;
    std::thread validating([&] {
        Reader reader = Reader::open(name);
        while (!stop.load(std::memory_order_relaxed)) {
            FrameView view;
            const uint64_t n = reader.latest();
            if (n == 0 || reader.acquire(n, view) != Status::ok) continue;
            bool intact = false;
            {
                detail::RacyReads racy;  // reads before validate() may be torn, by design
                intact = test::derived_frame_intact(view);
            }
            if (!reader.validate(view)) {
                ++in_place.rejected;
                continue;
            }
            ++in_place.accepted;
            if (!intact) ++in_place.torn;
        }
    });
    std::thread copying([&] {
        Reader reader = Reader::open(name);
        FrameView view;
        while (!stop.load(std::memory_order_relaxed)) {
            if (reader.next(std::chrono::milliseconds(100), view) != Status::ok) continue;
            ++copied.accepted;
            if (!test::derived_frame_intact(view)) ++copied.torn;
        }
    });
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    uint64_t published = 0;
    while (std::chrono::steady_clock::now() < until) {
        for (int i = 0; i < 256; ++i, ++published) {
            Draft draft = writer.begin();
            test::fill_derived_frame(draft);
            writer.commit(draft);
        }
    }
    stop = true;
    validating.join();
    copying.join();
    std::printf("threads: published %lu; in place accepted %lu torn %lu rejected %lu; copies accepted %lu torn %lu\n",
                published, in_place.accepted, in_place.torn, in_place.rejected, copied.accepted, copied.torn);
    EXPECT_EQ(in_place.torn, 0u);
    EXPECT_EQ(copied.torn, 0u);
    EXPECT_GT(in_place.accepted + copied.accepted, 0u);
}

}  // namespace
}  // namespace keplershm
