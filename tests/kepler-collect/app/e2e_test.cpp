// End to end: the real kepler-collect binary publishes, a libkeplershm Reader reads. Covers the
// test's own child in consecutive frames (by pid and start time), fake RAPL zones, the procfs
// fallback of an unprivileged run, clean retirement on SIGTERM and replacement of a dead collector.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "keplershm/keplershm.hpp"
#include "app/collector_process.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

using namespace std::chrono_literals;
using testing::BusyChild;
using testing::Collector;
using testing::TempDir;

/// Opens the segment once the collector has created it (generous bound: start-up loads eBPF).
// Waits while the segment is missing or not yet published; any other refusal (an owner or mode the
// reader does not accept) is the answer and is thrown with the collector's log.
keplershm::Reader open_when_ready(const std::string& name, const Collector& collector,
                                  const keplershm::ReaderOptions& options = {}) {
    for (int i = 0; i < 1500; ++i) {
        try {
            return keplershm::Reader::open(name, options);
        } catch (const keplershm::Error& e) {
            if (e.code() == KEPLERSHM_E_PERMISSION) {
                throw std::runtime_error(std::string("the reader refused the segment: ") + e.what() +
                                         "\nthe collector's log:\n" + collector.log());
            }
            testing::sleep_ms(10);
        }
    }
    throw std::runtime_error("the collector never created its segment; its log:\n" + collector.log());
}

bool has_process(const keplershm::FrameView& f, pid_t pid, uint64_t start_ticks) {
    for (const keplershm_process& p : f.processes()) {
        if (p.pid == static_cast<uint32_t>(pid) && p.start_time_ticks == start_ticks) return true;
    }
    return false;
}

bool segment_exists(const std::string& name) {
    struct stat st {};
    return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

TEST(EndToEnd, ConsecutiveFramesCarryOurChildByPidAndStartTime) {
    TempDir empty_sysfs;  // no meter, whatever the machine has
    const std::string name = testing::unique_segment_name("kc-e2e");
    BusyChild child(testing::test_cpu(), 0.5);
    const uint64_t start_ticks = testing::proc_times(child.pid()).start_ticks;
    Collector collector({"--shm-name", name, "--interval", "300ms", "--sysfs-root", empty_sysfs.path().string(),
                         "--kube", "off"});
    keplershm::Reader reader = open_when_ready(name, collector);

    const keplershm_segment_info info = reader.info();
    EXPECT_GT(info.cpu_count, 0u);
    EXPECT_EQ(info.zone_count, 0u);
    EXPECT_TRUE(info.metric_mask & KEPLERSHM_METRIC_CPU_TIME);
    EXPECT_TRUE(info.metric_mask & KEPLERSHM_METRIC_NODE_CPU);
    EXPECT_FALSE(info.metric_mask & KEPLERSHM_METRIC_ENERGY);
    EXPECT_FALSE(std::string(info.node_name).empty());
    EXPECT_FALSE(std::string(info.cpu_model).empty());
    const uint32_t expected_source = testing::bpf_skip_reason().empty() ? KEPLERSHM_SOURCE_BPF : KEPLERSHM_SOURCE_PROCFS;

    uint64_t previous = 0;
    int consecutive = 0;
    for (int i = 0; i < 40 && consecutive < 4; ++i) {
        keplershm::FrameView f;
        ASSERT_EQ(reader.next(5s, f), keplershm::Status::ok) << collector.log();
        EXPECT_EQ(f.source(), expected_source) << collector.log();
        EXPECT_EQ(f.power_source(), static_cast<uint32_t>(KEPLERSHM_POWER_NONE)) << "no measured power";
        EXPECT_GT(f.interval_end_ns(), f.interval_start_ns());
        EXPECT_GE(f.header().interval_end_realtime_ns, f.header().interval_start_realtime_ns);
        EXPECT_GT(f.header().process_read_time_ns, 0u);
        ASSERT_NE(f.unaccounted(), nullptr);
        EXPECT_GT(f.cpus().size(), 0u);
        const bool seen = has_process(f, child.pid(), start_ticks);
        consecutive = seen && f.sequence() == previous + 1 ? consecutive + 1 : (seen ? 1 : 0);
        previous = f.sequence();
    }
    EXPECT_GE(consecutive, 4) << "our child in 4 consecutive frames; collector log:\n" << collector.log();
    const keplershm_segment_info later = reader.info();
    EXPECT_GT(later.writer_cpu_time_ns, 0u) << "the collector publishes its own overhead";
    EXPECT_GT(later.writer_rss_bytes, 0u);

    EXPECT_EQ(collector.stop(SIGTERM), 0) << collector.log();
    EXPECT_EQ(reader.info().state, static_cast<uint32_t>(KEPLERSHM_STATE_RETIRED));
    EXPECT_FALSE(segment_exists(name)) << "a clean stop removes the name";
}

TEST(EndToEnd, C99ClientReadsTheCollectorsFrames) {
    TempDir empty_sysfs;
    const std::string name = testing::unique_segment_name("kc-e2e-c99");
    BusyChild child(testing::test_cpu(), 0.5);
    const uint64_t start_ticks = testing::proc_times(child.pid()).start_ticks;
    Collector collector({"--shm-name", name, "--interval", "200ms", "--sysfs-root", empty_sysfs.path().string(),
                         "--kube", "off"});
    const std::string command = std::string(KEPLER_COLLECT_C99_READER) + " " + name + " " +
                                std::to_string(child.pid()) + " " + std::to_string(start_ticks) + " 3";
    EXPECT_EQ(std::system(command.c_str()), 0) << "the C99 reader must see our child in 3 consecutive frames\n"
                                               << collector.log();
    EXPECT_EQ(collector.stop(SIGTERM), 0);
}

TEST(EndToEnd, FakeRaplZonesInTheHeaderAndEnergyInTheFrames) {
    TempDir sys;
    auto zone = [&](const std::string& dir, const std::string& zone_name, uint64_t energy) {
        sys.write("class/powercap/" + dir + "/name", zone_name + "\n");
        sys.write("class/powercap/" + dir + "/energy_uj", std::to_string(energy) + "\n");
        sys.write("class/powercap/" + dir + "/max_energy_range_uj", "262143328850\n");
    };
    zone("intel-rapl:0", "package-0", 1'000'000);
    zone("intel-rapl:0:0", "dram", 50'000);
    zone("intel-rapl:1", "package-1", 2'000'000);
    const std::string name = testing::unique_segment_name("kc-e2e-rapl");
    Collector collector({"--shm-name", name, "--interval", "200ms", "--source", "procfs", "--sysfs-root",
                         sys.path().string(), "--kube", "off"});
    keplershm::Reader reader = open_when_ready(name, collector);
    const keplershm_segment_info info = reader.info();
    ASSERT_EQ(info.zone_count, 3u) << collector.log();
    EXPECT_TRUE(info.metric_mask & KEPLERSHM_METRIC_ENERGY);
    EXPECT_EQ(keplershm::get_text(info.header->zones[1].name), "dram-0");

    keplershm::FrameView f;
    ASSERT_EQ(reader.next(5s, f), keplershm::Status::ok);
    zone("intel-rapl:0", "package-0", 1'600'000);  // +600 mJ on package 0
    // Frames until the change shows in the running total (each frame reads every zone once).
    uint64_t package0_total = 0;
    for (int i = 0; i < 20 && package0_total != 600'000; ++i) {
        ASSERT_EQ(reader.next(5s, f), keplershm::Status::ok);
        EXPECT_EQ(f.source(), static_cast<uint32_t>(KEPLERSHM_SOURCE_PROCFS));
        EXPECT_EQ(f.power_source(), static_cast<uint32_t>(KEPLERSHM_POWER_RAPL));
        ASSERT_EQ(f.zones().size(), 3u);
        for (const keplershm_zone_sample& z : f.zones()) {
            EXPECT_TRUE(z.flags & KEPLERSHM_ZONE_VALID);
            EXPECT_GT(z.read_time_ns, 0u);
        }
        package0_total = f.zones()[0].energy_total_uj;
        // Unaccounted is the node's busy time that the published processes do not explain, never
        // spread onto them: check the arithmetic on the real frame.
        uint64_t busy = 0, explained = 0;
        for (const keplershm_cpu_sample& c : f.cpus()) {
            busy += c.user_ns + c.nice_ns + c.system_ns + c.irq_ns + c.softirq_ns + c.steal_ns;
        }
        for (const keplershm_process& p : f.processes()) explained += p.cpu_time_ns;
        ASSERT_NE(f.unaccounted(), nullptr);
        const uint64_t remainder = busy > explained ? busy - explained : 0;
        EXPECT_EQ(f.unaccounted()->cpu_time_ns, std::max(remainder, f.unaccounted()->truncated_cpu_time_ns));
    }
    EXPECT_EQ(package0_total, 600'000u);
    EXPECT_EQ(f.zones()[2].energy_total_uj, 0u);
    EXPECT_EQ(collector.stop(SIGINT), 0) << collector.log();
}

TEST(EndToEnd, UnprivilegedAutoFallsBackToProcfsWithAReason) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to start the collector as another, unprivileged user";
    TempDir empty_sysfs;
    const std::string name = testing::unique_segment_name("kc-e2e-user");
    Collector collector({"--shm-name", name, "--interval", "200ms", "--sysfs-root", empty_sysfs.path().string(),
                         "--kube", "off", "--segment-mode", "0644"},
                        65534);  // nobody
    // A segment owned by neither root nor the reader is accepted only by name (and read by copy).
    keplershm::ReaderOptions accept_nobody;
    accept_nobody.segment_owner = 65534;
    keplershm::Reader reader = open_when_ready(name, collector, accept_nobody);
    keplershm::FrameView f;
    ASSERT_EQ(reader.next(5s, f), keplershm::Status::ok);
    EXPECT_EQ(f.source(), static_cast<uint32_t>(KEPLERSHM_SOURCE_PROCFS));
    EXPECT_EQ(collector.stop(SIGTERM), 0);
    const std::string log = collector.log();
    EXPECT_NE(log.find("bpf unavailable, using procfs instead: not privileged"), std::string::npos) << log;
}

TEST(EndToEnd, DeadCollectorIsReplacedAndReadersFollow) {
    TempDir empty_sysfs;
    const std::string name = testing::unique_segment_name("kc-e2e-restart");
    const std::vector<std::string> args{"--shm-name", name, "--interval", "200ms", "--source", "procfs",
                                        "--sysfs-root", empty_sysfs.path().string(), "--kube", "off"};
    auto first = std::make_unique<Collector>(args);
    keplershm::Reader reader = open_when_ready(name, *first);
    keplershm::FrameView f;
    ASSERT_EQ(reader.next(5s, f), keplershm::Status::ok);
    const uint64_t generation = f.generation();
    EXPECT_EQ(first->stop(SIGKILL), 128 + SIGKILL);  // crashed: the segment stays behind, heartbeat stops
    first.reset();
    EXPECT_TRUE(segment_exists(name));
    // Restarted at once: the new collector watches the dead heartbeat stand still for 3 periods + 1 s
    // (PROTOCOL.md §1.3; DESIGN.md "writer restart and crash"), saying so, and then takes the name.
    Collector second(args);
    bool moved = false;
    for (int i = 0; i < 50 && !moved; ++i) {
        const keplershm::Status s = reader.next(1s, f);
        moved = s == keplershm::Status::ok && f.generation() != generation;
    }
    EXPECT_TRUE(moved) << "the reader follows the new collector's generation; its log:\n" << second.log();
    EXPECT_NE(second.log().find("watching its heartbeat"), std::string::npos) << second.log();
    EXPECT_EQ(second.stop(SIGTERM), 0) << second.log();
}

TEST(EndToEnd, HelpAndUsageErrors) {
    auto run = [](const std::vector<std::string>& args, std::string& output) {
        Collector c(args);
        const int code = c.stop(0);  // signal 0: just wait for it to finish
        output = c.log();
        return code;
    };
    std::string output;
    EXPECT_EQ(run({"--help"}, output), 0);
    EXPECT_NE(output.find("--shm-name"), std::string::npos);
    EXPECT_NE(output.find("--max-segment-bytes"), std::string::npos);
    EXPECT_EQ(run({"--shm-name", "x", "--interval", "sometimes"}, output), 2);
    EXPECT_NE(output.find("--interval"), std::string::npos) << output;
    EXPECT_NE(run({"--interval", "1s"}, output), 0);
    EXPECT_NE(output.find("shm-name"), std::string::npos) << output;
}

// BMC credentials that would travel in clear text stop the collector before anything is sent, saying how
// to go on; nothing listens at the endpoint, so a request would have been a connection error instead.
TEST(EndToEnd, BmcCredentialsOverPlainHttpAreRefusedBeforeAnythingIsSent) {
    testing::TempDir dir;
    dir.write("credentials", "admin\nsecret\n");
    Collector c({"--shm-name", testing::unique_segment_name("plain-bmc"), "--source", "procfs", "--redfish-endpoint", "http://127.0.0.1:9",
                 "--redfish-credentials-file", (dir.path() / "credentials").string()});
    EXPECT_NE(c.stop(0), 0);
    const std::string output = c.log();
    EXPECT_NE(output.find("clear text"), std::string::npos) << output;
    EXPECT_NE(output.find("--redfish-allow-plain-http"), std::string::npos) << output;
}

}  // namespace
}  // namespace kepler::collect
