// Committed golden files of every released layout (golden/abi-*/) are read by this build: old bytes in
// /dev/shm (an old writer) and old recordings must keep working.
#include <gtest/gtest.h>

#include <filesystem>

#include "golden_content.hpp"
#include "test_support.hpp"

namespace keplershm {
namespace {

const std::filesystem::path kGoldenRoot = KEPLERSHM_GOLDEN_DIR;

void expect_golden_frame(const FrameView& view) {
    const uint64_t n = view.sequence();
    ASSERT_EQ(view.processes().size(), 2u);
    EXPECT_EQ(view.processes()[0].pid, 200u);
    EXPECT_EQ(view.processes()[1].start_time_ticks, 3001u);
    EXPECT_EQ(view.processes()[0].cpu_time_ns, n * 100'000'000ull);
    EXPECT_EQ(get_text(view.processes()[0].comm), "golden-app");
    ASSERT_EQ(view.workloads().size(), 1u);
    const keplershm_workload& w = view.workloads()[0];
    EXPECT_EQ(get_text(w.pod_name), "golden-pod");
    EXPECT_EQ(view.string_at(w.cgroup_path_offset, w.cgroup_path_length), "/kubepods.slice/golden");
    ASSERT_EQ(view.zones().size(), 2u);
    EXPECT_EQ(view.zones()[1].energy_delta_uj, 10'000'000u);
    EXPECT_EQ(view.cpus()[1].user_ns, n * 10 + 1);
    EXPECT_EQ(view.unaccounted()->cpu_time_ns, 7u);
    EXPECT_EQ(get_text(view.segment().node_name), "golden-node");
    EXPECT_EQ(get_text(view.segment().zones[1].name), "dram-0");
}

std::vector<std::filesystem::path> layouts() {
    std::vector<std::filesystem::path> dirs;
    for (const auto& entry : std::filesystem::directory_iterator(kGoldenRoot)) dirs.push_back(entry.path());
    return dirs;
}

TEST(Golden, EveryReleasedLayoutIsPresent) {
    EXPECT_TRUE(std::filesystem::exists(kGoldenRoot / "abi-1.0" / "segment.bin"));
    EXPECT_TRUE(std::filesystem::exists(kGoldenRoot / "abi-1.0" / "recording.kshmrec"));
}

TEST(Golden, OldSegmentImagesAreRead) {
    for (const auto& dir : layouts()) {
        SCOPED_TRACE(dir.string());
        test::ScopedName name("golden");
        test::write_segment_bytes(name, test::read_file_bytes((dir / "segment.bin").string()));
        Reader reader = Reader::open(name);
        EXPECT_EQ(reader.latest(), static_cast<uint64_t>(golden::kFrames));
        for (uint64_t n = 1; n <= golden::kFrames; ++n) {
            FrameView view;
            ASSERT_EQ(reader.acquire(n, view), Status::ok);
            expect_golden_frame(view);
            ASSERT_EQ(reader.copy(n, view), Status::ok);
            expect_golden_frame(view);
        }
        EXPECT_EQ(reader.wait(golden::kFrames, std::chrono::milliseconds(0)), Status::writer_gone);  // retired
    }
}

TEST(Golden, OldRecordingsAreRead) {
    for (const auto& dir : layouts()) {
        SCOPED_TRACE(dir.string());
        Reader reader = Reader::open_recording((dir / "recording.kshmrec").string());
        FrameView view;
        int frames = 0;
        while (reader.next(std::chrono::milliseconds(0), view) == Status::ok) {
            expect_golden_frame(view);
            ++frames;
        }
        EXPECT_EQ(frames, golden::kFrames);
    }
}

TEST(Golden, ThisBuildWritesTheSameBytesAsTheCurrentGoldenFiles) {
    // Frames written now, with the golden content, must equal the committed ones byte for byte except
    // for the fields that differ per run (generation, clocks): a layout change cannot slip through.
    test::ScopedName name("golden");
    Writer writer(name, golden::options());
    Draft draft = writer.begin();
    golden::fill(draft);
    writer.commit(draft);
    Reader fresh = Reader::open(name);
    Reader old = Reader::open_recording((kGoldenRoot / "abi-1.0" / "recording.kshmrec").string());
    FrameView a;
    FrameView b;
    ASSERT_EQ(fresh.copy(1, a), Status::ok);
    ASSERT_EQ(old.acquire(1, b), Status::ok);
    ASSERT_EQ(a.raw().frame_size, b.raw().frame_size);
    std::vector<uint8_t> x(a.raw().base, a.raw().base + a.raw().frame_size);
    std::vector<uint8_t> y(b.raw().base, b.raw().base + b.raw().frame_size);
    const size_t generation = offsetof(keplershm_frame, generation);
    std::fill_n(x.begin() + static_cast<long>(generation), 8, 0);
    std::fill_n(y.begin() + static_cast<long>(generation), 8, 0);
    EXPECT_EQ(x, y);
}

}  // namespace
}  // namespace keplershm
