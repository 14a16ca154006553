// The binary on recordings: identical output for identical input, CSV rows per interval x workload x
// zone, Prometheus text that `promtool check metrics` accepts, and clear errors on broken files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "support/subprocess.hpp"
#include "support/test_frames.hpp"

using namespace estimate_test;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

std::vector<TestFrame> workload_frames(int count, bool metered) {
    std::vector<TestFrame> frames;
    for (int i = 0; i < count; ++i) {
        TestFrame f = simple_frame((i + 1) * kSecond, kSecond, {100'000'000ull * (i % 4), 50'000'000, 7'000'000},
                                   metered ? std::vector<uint64_t>{20'000'000ull + i * 1000ull} : std::vector<uint64_t>{});
        f.workloads = {TestWorkload{.kind = KEPLERSHM_WORKLOAD_POD, .container_id = "abc", .container_name = "web", .pod_uid = "u1",
                                    .pod_name = "web-0", .pod_namespace = "shop"},
                       TestWorkload{.kind = KEPLERSHM_WORKLOAD_VM, .vm_id = "vm-7", .vm_name = "guest \"7\""}};
        f.processes[0].workload = 0;
        f.processes[1].workload = 1;
        f.processes[2].comm = "odd\x01name";
        if (i == 5) f.processes.push_back(TestProcess{.pid = 777, .start_time_ticks = 9, .cpu_time_ns = 1, .extra_flags = KEPLERSHM_PROC_EXITED});
        f.unaccounted_cpu_ns = 3'000'000;
        frames.push_back(f);
    }
    return frames;
}

int replay(const fs::path& recording, const fs::path& csv, const fs::path& prom, std::string& output) {
    return run_command({ESTIMATE_BINARY, "--replay", recording.string(), "--csv", csv.string(), "--prom-out", prom.string(),
                        "--process-metrics"},
                       output);
}

}  // namespace

TEST(Replay, TwiceGivesIdenticalOutput) {
    TempDir dir;
    const fs::path rec = dir.path() / "frames.kshm";
    record_frames(rec, node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0)}), workload_frames(30, true));
    std::string log;
    ASSERT_EQ(replay(rec, dir.path() / "a.csv", dir.path() / "a.prom", log), 0) << log;
    EXPECT_NE(log.find("replayed 30 frames"), std::string::npos) << log;
    ASSERT_EQ(replay(rec, dir.path() / "b.csv", dir.path() / "b.prom", log), 0) << log;
    const std::string csv = read_file((dir.path() / "a.csv").string());
    const std::string prom = read_file((dir.path() / "a.prom").string());
    EXPECT_EQ(csv, read_file((dir.path() / "b.csv").string()));
    EXPECT_EQ(prom, read_file((dir.path() / "b.prom").string()));

    // One row per interval x workload x zone: node, container abc, system_processes (VM and host
    // processes), unaccounted, pod, namespace and VM -> 7 rows per interval, one zone.
    const long rows = std::count(csv.begin(), csv.end(), '\n') - 1;
    EXPECT_EQ(rows, 30 * 7);
    EXPECT_NE(csv.find(",pod,\"u1\",\"web-0\",\"shop\",package,0,"), std::string::npos);
    EXPECT_NE(prom.find("kepler_container_package_joules_total{container_id=\"abc\""), std::string::npos);
    EXPECT_NE(prom.find("kepler_vm_joules_total{"), std::string::npos);
    EXPECT_NE(prom.find("command=\"odd_name\""), std::string::npos);
    EXPECT_EQ(prom.find("latency"), std::string::npos) << "wall-clock series must not be in replay output";
}

TEST(Replay, PromtoolAcceptsTheExposition) {
    if (!fs::exists("/usr/bin/promtool")) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
    TempDir dir;
    for (bool metered : {true, false}) {
        const fs::path rec = dir.path() / (metered ? "m.kshm" : "vm.kshm");
        std::vector<keplershm_zone_info> zones;
        if (metered) zones = {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0), zone_info("package-1", KEPLERSHM_ZONE_PACKAGE, 1),
                              zone_info("dram-0", KEPLERSHM_ZONE_DRAM, 0), zone_info("psys", KEPLERSHM_ZONE_PSYS, 0)};
        std::vector<TestFrame> frames = workload_frames(10, false);
        if (metered) {
            for (TestFrame& f : frames) f.zones = {{0, 9'000'000}, {1, 8'000'000}, {2, 2'000'000}, {3, 30'000'000}};
        }
        record_frames(rec, node_options(4, kProcfsMetrics, zones), frames);
        std::string log;
        const fs::path prom = dir.path() / "out.prom";
        ASSERT_EQ(replay(rec, dir.path() / "out.csv", prom, log), 0) << log;
        std::string lint;
        const int rc = promtool_check(prom.string(), lint);
        EXPECT_EQ(rc, 0) << lint;
        EXPECT_EQ(lint, "") << lint;
        const std::string text = read_file(prom.string());
        EXPECT_NE(text.find(metered ? "kepler_node_platform_joules_total" : "source=\"curve\""), std::string::npos);
    }
}

TEST(Replay, BrokenRecordingsGiveAClearError) {
    TempDir dir;
    const fs::path junk = dir.path() / "junk.kshm";
    std::ofstream(junk) << "definitely not a recording";
    std::string log;
    EXPECT_NE(run_command({ESTIMATE_BINARY, "--replay", junk.string(), "--quiet"}, log), 0);
    EXPECT_NE(log.find("kepler-estimate:"), std::string::npos) << log;

    // A recording cut in the middle: the frames before the cut are still estimated.
    const fs::path rec = dir.path() / "cut.kshm";
    record_frames(rec, node_options(4, kProcfsMetrics), workload_frames(10, false));
    fs::resize_file(rec, fs::file_size(rec) - 100);
    const fs::path csv = dir.path() / "cut.csv";
    run_command({ESTIMATE_BINARY, "--replay", rec.string(), "--csv", csv.string()}, log);
    EXPECT_NE(log.find("replayed 9 frames"), std::string::npos) << log;
}

TEST(Replay, BadCommandLinesAreRefused) {
    std::string log;
    EXPECT_NE(run_command({ESTIMATE_BINARY}, log), 0);
    EXPECT_NE(run_command({ESTIMATE_BINARY, "--replay", "x", "--model", "broken"}, log), 0);
    EXPECT_NE(log.find("NAME=SPEC"), std::string::npos) << log;
    EXPECT_NE(run_command({ESTIMATE_BINARY, "--replay", "x", "--idle-policy", "sometimes"}, log), 0);
    EXPECT_NE(run_command({ESTIMATE_BINARY, "--replay", "x", "--metric-names", "kepler-1.0"}, log), 0);
    EXPECT_NE(log.find("--metric-names"), std::string::npos) << log;
}

TEST(Replay, RecordingAcrossAWriterRestartKeepsCounting) {
    TempDir dir;
    const fs::path rec = dir.path() / "restart.kshm";
    const std::string name = unique_segment_name("rec-restart");
    const keplershm::WriterOptions options = node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0)});
    {
        keplershm::Recorder recorder(rec.string());
        keplershm::FrameView view;
        auto writer = std::make_unique<TestWriter>(name, options);
        keplershm::Reader reader = keplershm::Reader::open(name);
        const std::vector<TestFrame> frames = workload_frames(10, true);
        for (size_t i = 0; i < frames.size(); ++i) {
            if (i == 5) {  // the collector restarts: a new generation whose frames start over
                writer.reset();
                writer = std::make_unique<TestWriter>(name, options);
            }
            writer->write(frames[i]);
            ASSERT_EQ(reader.next(std::chrono::milliseconds(2000), view), keplershm::Status::ok) << "frame " << i;
            recorder.append(reader, view);
        }
        recorder.close();
    }
    std::string log;
    ASSERT_EQ(replay(rec, dir.path() / "a.csv", dir.path() / "a.prom", log), 0) << log;
    ASSERT_EQ(replay(rec, dir.path() / "b.csv", dir.path() / "b.prom", log), 0) << log;
    EXPECT_EQ(read_file((dir.path() / "a.prom").string()), read_file((dir.path() / "b.prom").string()));
    const std::string prom = read_file((dir.path() / "a.prom").string());
    EXPECT_NE(prom.find("kepler_estimator_frames_read_total 10"), std::string::npos) << prom;
    // 10 intervals of 20.000000 .. 20.009000 J each: 200.045 J on the node, whatever the generation.
    double node = 0;
    for (const char* mode : {"dynamic", "idle"}) {
        const std::string key = std::string("kepler_node_package_joules_total{package=\"0\",instance=\"test-node\",source=\"rapl\",mode=\"") + mode + "\"} ";
        const size_t at = prom.find(key);
        ASSERT_NE(at, std::string::npos) << prom;
        node += std::stod(prom.substr(at + key.size()));
    }
    EXPECT_NEAR(node, 200.045, 1e-6);
}
