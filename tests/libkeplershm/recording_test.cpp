// Recordings: the same frame bytes in a file, read back through the same Reader; several generations in
// one file; cut files, flipped bytes and foreign files give clear errors.
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace keplershm {
namespace {

using test::ScopedName;
using test::ScopedPath;
using namespace std::chrono_literals;

/// Records `frames` frames of a derived-content writer into `path`.
void record_frames(const std::string& name, const std::string& path, int frames, int grow_at = -1) {
    Writer writer(name, test::small_options());  // 64 processes: derived frames have up to 50
    Reader reader = Reader::open(name);
    Recorder recorder(path);
    for (int i = 1; i <= frames; ++i) {
        Draft draft = writer.begin();
        test::fill_derived_frame(draft);
        if (i == grow_at) draft.set_processes_wanted(100);  // next frame: new generation
        writer.commit(draft);
        FrameView view;
        ASSERT_EQ(reader.next(1000ms, view), Status::ok);
        recorder.append(reader, view);
    }
    recorder.close();
}

TEST(Recording, RoundTripsEveryFrame) {
    ScopedName name("rec");
    ScopedPath path("rec");
    record_frames(name, path.str(), 30);
    Reader reader = Reader::open_recording(path.str());
    EXPECT_EQ(reader.latest(), 30u);
    EXPECT_TRUE(reader.info().is_recording);
    EXPECT_EQ(std::string(reader.info().node_name), "test-node");
    FrameView view;
    for (uint64_t n = 1; n <= 30; ++n) {
        ASSERT_EQ(reader.next(0ms, view), Status::ok);
        EXPECT_EQ(view.sequence(), n);
        EXPECT_TRUE(test::derived_frame_intact(view)) << n;
    }
    EXPECT_EQ(reader.next(0ms, view), Status::end_of_recording);
    ASSERT_EQ(reader.acquire(7, view), Status::ok);  // random access by position
    EXPECT_EQ(view.sequence(), 7u);
    EXPECT_EQ(reader.schema().size(), library_schema().size());
}

TEST(Recording, SpansGenerations) {
    ScopedName name("rec");
    ScopedPath path("rec");
    record_frames(name, path.str(), 10, 5);
    Reader reader = Reader::open_recording(path.str());
    FrameView view;
    uint64_t generation = 0;
    int generations = 0;
    for (uint64_t n = 1; n <= 10; ++n) {
        ASSERT_EQ(reader.next(0ms, view), Status::ok);
        EXPECT_EQ(view.sequence(), n);
        EXPECT_TRUE(test::derived_frame_intact(view));
        if (view.generation() != generation) ++generations;
        generation = view.generation();
        EXPECT_EQ(view.segment().generation, view.generation());
    }
    EXPECT_EQ(generations, 2);
    EXPECT_EQ(view.segment().process_capacity, 128u);  // doubled from 64
}

TEST(Recording, ACutFileYieldsTheWholeFramesThenTruncated) {
    ScopedName name("rec");
    ScopedPath path("rec");
    record_frames(name, path.str(), 5);
    std::vector<uint8_t> bytes = test::read_file_bytes(path.str());
    bytes.resize(bytes.size() - 100);  // cut into the last frame
    test::write_file_bytes(path.str(), bytes);
    Reader reader = Reader::open_recording(path.str());
    EXPECT_EQ(reader.latest(), 4u);
    FrameView view;
    for (int n = 0; n < 4; ++n) ASSERT_EQ(reader.next(0ms, view), Status::ok);
    EXPECT_EQ(reader.next(0ms, view), Status::truncated);
}

TEST(Recording, AFlippedByteIsCaughtByTheChecksum) {
    ScopedName name("rec");
    ScopedPath path("rec");
    record_frames(name, path.str(), 3);
    std::vector<uint8_t> bytes = test::read_file_bytes(path.str());
    bytes[bytes.size() - 500] ^= 0x40;  // inside the last frame's payload
    test::write_file_bytes(path.str(), bytes);
    Reader reader = Reader::open_recording(path.str());
    FrameView view;
    ASSERT_EQ(reader.acquire(1, view), Status::ok);
    try {
        (void)reader.acquire(3, view);
        FAIL() << "corrupt frame accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_CORRUPT);
        EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
    }
}

TEST(Recording, NextStepsOverACorruptFrame) {
    ScopedName name("rec");
    ScopedPath path("rec");
    record_frames(name, path.str(), 3);
    std::vector<uint8_t> bytes = test::read_file_bytes(path.str());
    bytes[bytes.size() - 500] ^= 0x40;  // inside frame 3
    test::write_file_bytes(path.str(), bytes);
    Reader reader = Reader::open_recording(path.str());
    FrameView view;
    ASSERT_EQ(reader.next(0ms, view), Status::ok);
    ASSERT_EQ(reader.next(0ms, view), Status::ok);
    EXPECT_THROW((void)reader.next(0ms, view), Error);
    EXPECT_EQ(reader.next(0ms, view), Status::end_of_recording);  // not the same error forever
}

TEST(Recording, ForeignAndEmptyFilesAreRejected) {
    ScopedPath path("rec");
    test::write_file_bytes(path.str(), std::vector<uint8_t>(200, 'x'));
    try {
        Reader::open_recording(path.str());
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_BAD_MAGIC);
    }
    test::write_file_bytes(path.str(), std::vector<uint8_t>(10, 0));
    EXPECT_THROW(Reader::open_recording(path.str()), Error);
    try {
        Reader::open_recording("/nonexistent/recording");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_NOT_FOUND);
    }
}

TEST(Recording, TheSizeCapStopsTheRecorder) {
    ScopedName name("rec");
    ScopedPath path("rec");
    Writer writer(name, test::small_options());
    Reader reader = Reader::open(name);
    Recorder recorder(path.str(), RecorderOptions{20000, 0});
    int appended = 0;
    try {
        for (int i = 0; i < 100; ++i) {
            Draft draft = writer.begin();
            test::fill_derived_frame(draft);
            writer.commit(draft);
            FrameView view;
            ASSERT_EQ(reader.next(1000ms, view), Status::ok);
            recorder.append(reader, view);
            ++appended;
        }
        FAIL() << "cap not enforced";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_NO_SPACE);
    }
    recorder.close();
    EXPECT_LE(test::read_file_bytes(path.str()).size(), 20000u);
    EXPECT_EQ(Reader::open_recording(path.str()).latest(), static_cast<uint64_t>(appended));
}

TEST(Recording, FollowRecordsALiveSegmentUntilTheWriterRetires) {
    ScopedName name("rec");
    ScopedPath path("rec");
    auto writer = std::make_unique<Writer>(name, test::small_options());
    Reader reader = Reader::open(name);
    const pid_t child = test::spawn([&] {
        for (int i = 0; i < 20; ++i) {
            Draft draft = writer->begin();
            test::fill_derived_frame(draft);
            writer->commit(draft);
            usleep(2000);
        }
        writer->close();
        return 0;
    });
    Recorder recorder(path.str());
    const uint64_t frames = recorder.follow(reader, 0ms);
    ASSERT_EQ(test::reap(child), 0);
    recorder.close();
    EXPECT_GE(frames, 15u);  // it starts at the newest frame when it attaches
    Reader replay = Reader::open_recording(path.str());
    EXPECT_EQ(replay.latest(), frames);
    FrameView view;
    while (replay.next(0ms, view) == Status::ok) EXPECT_TRUE(test::derived_frame_intact(view));
}

}  // namespace
}  // namespace keplershm
