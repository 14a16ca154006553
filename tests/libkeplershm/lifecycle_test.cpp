// Segment life cycle: exclusive creation and its mode, the byte cap, refusing a live writer's name,
// replacing a dead one, retirement, growth into a new generation, and symlinks planted at the name.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "test_support.hpp"

namespace keplershm {
namespace {

using test::ScopedName;
using namespace std::chrono_literals;

using test::publish;

TEST(Lifecycle, SegmentIsCreatedWithMode0640WhateverTheUmask) {
    ScopedName name("life");
    const mode_t old = umask(0);
    Writer writer(name, test::small_options());
    umask(old);
    struct stat st {};
    ASSERT_EQ(stat(("/dev/shm/" + name.str()).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0640u);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), writer.header().segment_size);
    // posix_fallocate reserved the pages: no SIGBUS later even if tmpfs fills up.
    EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, writer.header().segment_size);
}

TEST(Lifecycle, TheByteCapIsEnforcedWithTheSizeFormulaInTheMessage) {
    ScopedName name("life");
    WriterOptions options = test::small_options();
    options.process_capacity = 100000;
    options.max_segment_bytes = 1 << 20;
    try {
        Writer writer(name, options);
        FAIL() << "created a segment above the cap";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_NO_SPACE);
        EXPECT_NE(std::string(e.what()).find("cap is 1048576 bytes"), std::string::npos) << e.what();
    }
}

TEST(Lifecycle, ALiveWritersNameIsNotTaken) {
    ScopedName name("life");
    Writer first(name, test::small_options());
    {
        test::BackgroundHeartbeat alive(first, 100ms);  // live means heartbeating (PROTOCOL.md §1.3)
        const auto start = std::chrono::steady_clock::now();
        try {
            Writer second(name, test::small_options());
            FAIL() << "second writer took a live segment";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), KEPLERSHM_E_EXISTS);
            EXPECT_NE(std::string(e.what()).find("heartbeat advancing"), std::string::npos) << e.what();
        }
        // Refused as soon as a beat was seen, not after the 4 s it takes to call a writer dead.
        EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
    }
    publish(first, 1);  // the first writer is unaffected
    EXPECT_EQ(Reader::open(name).latest(), 1u);
}

TEST(Lifecycle, ADeadWritersSegmentIsReplacedAndNumberingContinues) {
    ScopedName name("life");
    WriterOptions options = test::small_options();
    options.heartbeat_period = 10ms;
    const pid_t child = test::spawn([&] {
        Writer writer(name, options);
        publish(writer, 5);
        raise(SIGKILL);  // dies without retiring
        return 0;
    });
    ASSERT_EQ(test::reap(child), -SIGKILL);
    Reader reader = Reader::open(name);
    EXPECT_EQ(reader.latest(), 5u);
    // The successor watches the dead heartbeat stand still for the readers' timeout (3 periods + 1 s)
    // on its own clock, then takes the name.
    const auto start = std::chrono::steady_clock::now();
    Writer successor(name, options);
    const auto watched = std::chrono::steady_clock::now() - start;
    EXPECT_GE(watched, 1030ms);
    EXPECT_LT(watched, 3s);
    EXPECT_EQ(successor.header().first_sequence, 6u);
    publish(successor, 1);
    EXPECT_EQ(Reader::open(name).latest(), 6u);
    // The reader of the dead generation learns it was replaced and follows.
    FrameView view;
    ASSERT_EQ(reader.acquire(5, view), Status::ok);
    EXPECT_EQ(reader.wait(5, 2000ms), Status::ok);
    EXPECT_EQ(reader.info().reattach_count, 1u);
    ASSERT_EQ(reader.acquire(6, view), Status::ok);
    EXPECT_TRUE(test::derived_frame_intact(view));
}

TEST(Lifecycle, CleanStopRetiresTheSegmentAndRemovesTheName) {
    ScopedName name("life");
    auto writer = std::make_unique<Writer>(name, test::small_options());
    publish(*writer, 2);
    Reader reader = Reader::open(name);
    writer.reset();
    EXPECT_EQ(reader.info().state, static_cast<uint32_t>(KEPLERSHM_STATE_RETIRED));
    EXPECT_EQ(reader.wait(2, 100ms), Status::writer_gone);
    FrameView view;
    EXPECT_EQ(reader.acquire(2, view), Status::ok);  // published frames stay readable
    try {
        Reader::open(name);
        FAIL() << "name still present";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_NOT_FOUND);
    }
}

TEST(Lifecycle, OverCapacityFramesAreFlaggedAndTheSegmentGrows) {
    ScopedName name("life");
    WriterOptions options = test::small_options();
    options.process_capacity = 8;
    Writer writer(name, options);
    Reader reader = Reader::open(name);
    const uint64_t first_generation = writer.generation();

    Draft draft = writer.begin();
    keplershm_process p{};
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(draft.add_process(p));
    draft.frame().flags |= KEPLERSHM_FRAME_TRUNCATED;
    draft.set_processes_wanted(20);
    draft.unaccounted().truncated_processes = 12;
    writer.commit(draft);

    draft = writer.begin();  // grows before this frame
    EXPECT_NE(writer.generation(), first_generation);
    EXPECT_GE(draft.process_capacity(), 20u);
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(draft.add_process(p));
    writer.commit(draft);

    FrameView view;
    ASSERT_EQ(reader.next(1000ms, view), Status::ok);
    EXPECT_EQ(view.sequence(), 1u);
    EXPECT_TRUE(view.flags() & KEPLERSHM_FRAME_TRUNCATED);
    EXPECT_EQ(view.unaccounted()->truncated_processes, 12u);
    ASSERT_EQ(reader.next(1000ms, view), Status::ok);
    EXPECT_EQ(view.sequence(), 2u);
    EXPECT_EQ(view.missed(), 0u);
    EXPECT_EQ(view.processes().size(), 20u);
    EXPECT_EQ(reader.info().reattach_count, 1u);
    EXPECT_EQ(reader.info().process_capacity, draft.process_capacity());
}

TEST(Lifecycle, GrowthStopsAtTheCap) {
    ScopedName name("life");
    WriterOptions options = test::small_options();
    options.process_capacity = 8;
    options.max_segment_bytes = 64 * 1024;
    Writer writer(name, options);
    const uint64_t generation = writer.generation();
    Draft draft = writer.begin();
    draft.set_processes_wanted(1'000'000);
    writer.commit(draft);
    draft = writer.begin();
    EXPECT_LE(writer.header().segment_size, options.max_segment_bytes);
    if (writer.generation() != generation) {
        EXPECT_GT(draft.process_capacity(), 8u);
    }
    writer.commit(draft);
}

TEST(Lifecycle, ASymlinkAtTheNameIsNeverFollowed) {
    ScopedName name("life");
    test::ScopedPath target("symlink-target");
    test::write_file_bytes(target.str(), std::vector<uint8_t>(8192, 0));
    ASSERT_EQ(symlink(target.str().c_str(), ("/dev/shm/" + name.str()).c_str()), 0);
    EXPECT_THROW(Writer(name, test::small_options()), Error);
    EXPECT_THROW(Reader::open(name), Error);
    EXPECT_EQ(test::read_file_bytes(target.str()), std::vector<uint8_t>(8192, 0));  // untouched
}

TEST(Lifecycle, GrowthRefusedByTheCapIsReportedOnce) {
    ScopedName name("life");
    WriterOptions options = test::small_options();
    options.process_capacity = 8;
    options.max_segment_bytes = 40 * 1024;  // room for 8 processes per slot, not for 16
    std::vector<std::string> warnings;
    options.on_warning = [&](const std::string& message) { warnings.push_back(message); };
    Writer writer(name, options);
    for (int i = 0; i < 5; ++i) {
        Draft draft = writer.begin();
        draft.set_processes_wanted(100000);
        writer.commit(draft);
    }
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("cannot grow"), std::string::npos) << warnings[0];
}

TEST(Lifecycle, AFifoAtTheNameFailsAtOnceInsteadOfBlocking) {
    ScopedName name("life");
    ASSERT_EQ(mkfifo(("/dev/shm/" + name.str()).c_str(), 0666), 0);
    const auto start = std::chrono::steady_clock::now();
    try {
        Reader::open(name);
        FAIL() << "opened a FIFO";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_CORRUPT);
        EXPECT_NE(std::string(e.what()).find("not a regular"), std::string::npos) << e.what();
    }
    try {
        Writer writer(name, test::small_options());
        FAIL() << "took a FIFO's name";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_CORRUPT);  // not EXISTS: no live writer to wait for
        EXPECT_NE(std::string(e.what()).find("/dev/shm/" + name.str()), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("remove it"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // the bound is the feature: nothing blocked
}

TEST(Lifecycle, BadNamesAreRejected) {
    for (const char* bad : {"", "../etc/passwd", "a/b", ".hidden", "name with space"}) {
        try {
            Writer writer(bad, test::small_options());
            FAIL() << "accepted '" << bad << "'";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), KEPLERSHM_E_INVALID_ARGUMENT) << bad;
        }
    }
}

TEST(Lifecycle, HeartbeatNoticesThatTheNameWasTakenOver) {
    ScopedName name("life");
    WriterOptions options = test::small_options();
    Writer first(name, options);
    options.replace_live = true;
    Writer second(name, options);
    EXPECT_THROW(first.heartbeat(), Error);
    EXPECT_NO_THROW(second.heartbeat());
}

}  // namespace
}  // namespace keplershm
