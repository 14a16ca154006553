// Committed golden files of every released layout (golden/abi-*/) are read by this build: old bytes in
// /dev/shm (an old writer) and old recordings must keep working.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "golden_content.hpp"
#include "test_support.hpp"

namespace keplershm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::filesystem::path kGoldenRoot = KEPLERSHM_GOLDEN_DIR;
const std::string kCurrentLayout = "abi-" + std::to_string(KEPLERSHM_ABI_MAJOR) + "." + std::to_string(KEPLERSHM_ABI_MINOR);
constexpr auto kShortTimeout = 200ms;  // the readers' heartbeat timeout in these tests

ReaderOptions short_timeout() {
    ReaderOptions o;
    o.heartbeat_timeout = kShortTimeout;
    return o;
}

/// How a reader that just opened an image judges its writer: the verdict of a wait that outlasts the
/// heartbeat timeout, and how long the reader watched before giving it.
std::pair<Status, Clock::duration> verdict_on(const std::string& name) {
    Reader reader = Reader::open(name, short_timeout());
    const auto start = Clock::now();
    const Status status = reader.wait(golden::kFrames, 10s);
    return {status, Clock::now() - start};
}

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
    if (view.segment().abi_minor >= 5) {  // before 1.5 the field was reserved, and zero
        EXPECT_EQ(view.unaccounted()->inexact_cuts, n == 2 ? 1u : 0u);
        EXPECT_EQ((view.header().flags & KEPLERSHM_FRAME_CUT_INEXACT) != 0, n == 2);
    } else {
        EXPECT_EQ(view.unaccounted()->inexact_cuts, 0u);
    }
    EXPECT_EQ(get_text(view.segment().node_name), "golden-node");
    EXPECT_EQ(get_text(view.segment().zones[1].name), "dram-0");
    if (view.segment().abi_minor < 4) {
        EXPECT_EQ(view.gpu_devices().size(), 0u);  // layouts before 1.4 have no GPU sections
        return;
    }
    ASSERT_EQ(view.gpu_devices().size(), 1u);
    EXPECT_EQ(get_text(view.gpu_devices()[0].uuid), "GPU-00000000-1111-2222-3333-444444444444");
    EXPECT_EQ(view.gpu_devices()[0].power_limit_mw, 700'000u);
    ASSERT_EQ(view.gpu_usage().size(), 1u);
    EXPECT_EQ(view.gpu_usage()[0].pid, 200u);
    EXPECT_EQ(view.gpu_usage()[0].busy_ns, n * 250'000'000ull);
}

std::vector<std::filesystem::path> layouts() {
    std::vector<std::filesystem::path> dirs;
    for (const auto& entry : std::filesystem::directory_iterator(kGoldenRoot)) dirs.push_back(entry.path());
    return dirs;
}

TEST(Golden, EveryReleasedLayoutIsPresent) {
    for (const std::string layout : {"abi-1.0", "abi-1.1", "abi-1.2", "abi-1.3", "abi-1.4", "abi-1.5"}) {
        EXPECT_TRUE(std::filesystem::exists(kGoldenRoot / layout / "segment.bin")) << layout;
        EXPECT_TRUE(std::filesystem::exists(kGoldenRoot / layout / "recording.kshmrec")) << layout;
    }
    EXPECT_TRUE(std::filesystem::exists(kGoldenRoot / kCurrentLayout)) << "make_golden.cpp writes a new layout's files";
}

TEST(Golden, OldSegmentImagesAreRead) {
    for (const auto& dir : layouts()) {
        SCOPED_TRACE(dir.string());
        test::ScopedName name("golden");
        test::write_segment_bytes(name, test::read_file_bytes((dir / "segment.bin").string()));
        Reader reader = Reader::open(name, short_timeout());
        EXPECT_EQ(reader.latest(), static_cast<uint64_t>(golden::kFrames));
        for (uint64_t n = 1; n <= golden::kFrames; ++n) {
            FrameView view;
            ASSERT_EQ(reader.acquire(n, view), Status::ok);
            expect_golden_frame(view);
            ASSERT_EQ(reader.copy(n, view), Status::ok);
            expect_golden_frame(view);
        }
        // The image's writer stopped without retiring, on another machine at another uptime: a reader calls
        // it stale once it has watched its heartbeat stand still for the timeout, on any machine.
        EXPECT_EQ(reader.info().state, static_cast<uint32_t>(KEPLERSHM_STATE_ACTIVE));
        const auto [status, watched] = verdict_on(name);
        EXPECT_EQ(status, Status::writer_gone);
        EXPECT_GE(watched, kShortTimeout);
        EXPECT_LT(watched, 5s);
    }
}

TEST(Golden, TheStaleVerdictDoesNotDependOnTheClockValueInTheImage) {
    // The same dead image with its CLOCK_MONOTONIC heartbeat far in the reader's past, at its present and
    // far in its future (another boot, another time namespace): the verdict and its timing are the same.
    const std::vector<uint8_t> image = test::read_file_bytes((kGoldenRoot / kCurrentLayout / "segment.bin").string());
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const uint64_t now_ns = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(now.tv_nsec);
    for (const uint64_t heartbeat : std::vector<uint64_t>{0, 1, now_ns, now_ns + 864'000'000'000'000ull, ~uint64_t{0}}) {
        SCOPED_TRACE(heartbeat);
        std::vector<uint8_t> patched = image;
        std::memcpy(patched.data() + offsetof(keplershm_header, heartbeat_ns), &heartbeat, sizeof heartbeat);
        test::ScopedName name("golden-clock");
        test::write_segment_bytes(name, patched);
        Reader fresh = Reader::open(name, short_timeout());
        EXPECT_EQ(fresh.wait(golden::kFrames, 0ms), Status::timeout) << "not judged before it was watched";
        EXPECT_EQ(fresh.info().writer_stale, 0u);
        const auto [status, watched] = verdict_on(name);
        EXPECT_EQ(status, Status::writer_gone);
        EXPECT_GE(watched, kShortTimeout);
        EXPECT_LT(watched, 5s);
    }
}

TEST(Golden, TheHeartbeatLineOfEachLayoutIsReported) {
    for (const auto& dir : layouts()) {
        SCOPED_TRACE(dir.string());
        test::ScopedName name("golden-beat");
        test::write_segment_bytes(name, test::read_file_bytes((dir / "segment.bin").string()));
        const keplershm_segment_info info = Reader::open(name).info();
        if (info.abi_minor == 0) {  // 1.0 writers only stored heartbeat_ns
            EXPECT_EQ(info.heartbeat_count, 0u);
            EXPECT_EQ(info.heartbeat_realtime_ns, 0u);
        } else {
            EXPECT_GE(info.heartbeat_count, 1u + golden::kFrames) << "one beat at creation, one per frame";
            EXPECT_GT(info.heartbeat_realtime_ns, 1'700'000'000'000'000'000ull) << "a wall time after 2023";
        }
        EXPECT_EQ(info.heartbeat_advanced, 0u);
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
    Reader old = Reader::open_recording((kGoldenRoot / kCurrentLayout / "recording.kshmrec").string());
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
