// Fault: /dev/shm is full. Each test runs in a private mount namespace with a 1 MiB tmpfs over /dev/shm
// (as in a pod whose memory emptyDir hit its sizeLimit). The collector must refuse clearly when its
// segment does not fit, keep publishing (truncated) when growth does not fit, never leave temporary
// objects behind, and never die of SIGBUS (pages are reserved up front).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "support/frames.hpp"
#include "support/process.hpp"

namespace {

using namespace std::chrono_literals;
using e2e::Child;
namespace fs = std::filesystem;

/// Puts this test process (and every child it starts) on a private, small /dev/shm. Empty on success,
/// else why it cannot (the test skips).
std::string enter_small_shm(const char* size) {
    if (geteuid() != 0) return "needs root to mount a tmpfs";
    if (unshare(CLONE_NEWNS) != 0) return std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    // Private propagation first, so the tmpfs below never shows up outside this namespace.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return std::string("make-rprivate: ") + std::strerror(errno);
    const std::string options = std::string("size=") + size + ",mode=1777";
    if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
        return std::string("mount tmpfs on /dev/shm: ") + std::strerror(errno);
    }
    return {};
}

uint64_t shm_free() {
    struct statvfs v {};
    statvfs("/dev/shm", &v);
    return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
}

/// Takes all of /dev/shm's free space but `leave` bytes, with reserved (not sparse) pages.
void fill_shm(const fs::path& path, uint64_t leave) {
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    const uint64_t free = shm_free();
    ASSERT_GT(free, leave);
    ASSERT_EQ(posix_fallocate(fd, 0, static_cast<off_t>(free - leave)), 0);
    close(fd);
    ASSERT_LE(shm_free(), leave);
}

std::vector<std::string> shm_entries() {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator("/dev/shm")) out.push_back(entry.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<std::string> small_collector(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{COLLECT_BINARY, "--shm-name", name, "--source", "procfs", "--kube", "off",
                                  "--interval", "300ms", "--process-capacity", "2", "--workload-capacity", "4",
                                  "--string-capacity", "256", "--slots", "4"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
}

uint64_t generation_at(const std::string& name) {
    try {
        return keplershm::Reader::open(name).info().generation;
    } catch (const keplershm::Error&) {
        return 0;
    }
}

TEST(ShmFull, SegmentThatDoesNotFitIsRefusedClearly) {
    if (const std::string why = enter_small_shm("1m"); !why.empty()) GTEST_SKIP() << why;
    const std::string name = e2e::unique_name("too-big");
    // The default capacities need ~10 MB.
    const e2e::Result r = e2e::run({COLLECT_BINARY, "--shm-name", name, "--kube", "off", "--frames", "2"}, 60s);
    EXPECT_FALSE(r.exit.crashed()) << r.exit.describe();
    EXPECT_EQ(r.exit.code, 1);
    EXPECT_NE(r.err.find("/dev/shm has"), std::string::npos) << "names the free space: " << r.err;
    EXPECT_EQ(shm_entries(), std::vector<std::string>{}) << "no temporary segment left behind";
}

TEST(ShmFull, GrowthThatDoesNotFitKeepsPublishingTruncatedFrames) {
    if (const std::string why = enter_small_shm("1m"); !why.empty()) GTEST_SKIP() << why;
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("full-later");
    // A crowd in its own pid namespace (which also gets a copy of this small /dev/shm) outgrows 2 records.
    std::vector<std::string> argv{"unshare", "--pid", "--fork", "--mount-proc", "--kill-child", HELPER_BINARY, "crowd",
                                  "--children", "12", "--burn-us", "600", "--period-ms", "20", "--"};
    const auto collector = small_collector(name, {"--frames", "16", "--max-segment-bytes", "64Mi"});
    argv.insert(argv.end(), collector.begin(), collector.end());
    Child scenario(argv, tmp / "scenario.log");
    auto reader = e2e::open_when_present(name, 30s);
    ASSERT_TRUE(reader) << scenario.log();
    const uint64_t segment = reader->info().segment_size;
    fill_shm("/dev/shm/filler", segment / 2);  // room for no second generation
    const std::vector<std::string> before = shm_entries();

    std::vector<e2e::FrameSummary> frames;
    const e2e::Result estimator = e2e::run({ESTIMATE_BINARY, "--shm-name", name, "--listen", "none", "--duration", "2",
                                            "--prom-out", (tmp / "metrics.prom").string()}, 60s);
    e2e::read_frames(*reader, frames, [&] { return !scenario.running(); }, 60s);
    const auto exit = scenario.wait(10s);
    ASSERT_TRUE(exit) << scenario.log();
    EXPECT_EQ(exit->code, 0) << exit->describe() << " (SIGBUS is 135)\n" << scenario.log();
    EXPECT_EQ(estimator.exit.code, 0) << estimator.err;
    EXPECT_NE(e2e::read_file(tmp / "metrics.prom").find("kepler_estimator_frames_read_total"), std::string::npos);

    ASSERT_GE(frames.size(), 5u);
    int truncated = 0;
    for (const e2e::FrameSummary& f : frames) {
        EXPECT_EQ(f.generation, frames.front().generation) << "no room for a bigger generation";
        EXPECT_EQ(f.process_capacity, 2u);
        if (f.flags & KEPLERSHM_FRAME_TRUNCATED) {
            ++truncated;
            EXPECT_GE(f.unaccounted.cpu_time_ns, f.unaccounted.truncated_cpu_time_ns);
        }
    }
    EXPECT_GE(truncated, 3) << "the crowd did not outgrow 2 records?";
    EXPECT_EQ(frames.back().sequence - frames.front().sequence + 1, frames.size()) << "no frame lost";
    EXPECT_EQ(before, (std::vector<std::string>{"filler", name}));
    EXPECT_EQ(shm_entries(), std::vector<std::string>{"filler"}) << "clean stop removed the segment; no temporary objects";

    const std::string log = scenario.log();
    EXPECT_NE(log.find("grow"), std::string::npos) << "the collector tells the operator that growth failed: " << log;
}

TEST(ShmFull, RestartWithoutRoomForANewGenerationIsRefusedAndLeavesTheOldSegment) {
    if (const std::string why = enter_small_shm("1m"); !why.empty()) GTEST_SKIP() << why;
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("no-room");
    uint64_t old_generation = 0;
    {
        Child first(small_collector(name), tmp / "first.log");
        ASSERT_TRUE(e2e::wait_until([&] { return (old_generation = generation_at(name)) != 0; }, 30s)) << first.log();
        first.signal(SIGKILL);
        ASSERT_EQ(first.wait(10s)->signal, SIGKILL);
    }
    const uint64_t segment = fs::file_size("/dev/shm/" + name);
    fill_shm("/dev/shm/filler", segment / 2);

    // A replacement needs the new segment while the old one still exists.
    const e2e::Result refused = e2e::run(small_collector(name, {"--replace-live", "--frames", "2"}), 60s);
    EXPECT_FALSE(refused.exit.crashed()) << refused.exit.describe();
    EXPECT_EQ(refused.exit.code, 1);
    EXPECT_NE(refused.err.find("/dev/shm has"), std::string::npos) << refused.err;
    EXPECT_EQ(generation_at(name), old_generation) << "the old segment is untouched";
    EXPECT_EQ(shm_entries(), (std::vector<std::string>{"filler", name})) << "no temporary segment left behind";

    fs::remove("/dev/shm/filler");
    const e2e::Result replaced = e2e::run(small_collector(name, {"--replace-live", "--frames", "2"}), 60s);
    EXPECT_EQ(replaced.exit.code, 0) << replaced.err;
    EXPECT_EQ(shm_entries(), std::vector<std::string>{}) << "replaced, then removed at the clean stop";
}

}  // namespace
