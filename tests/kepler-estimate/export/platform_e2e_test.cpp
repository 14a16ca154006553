// End to end, platform power: a fake BMC (HTTPS, its own certificate, a Redfish session) and a fake RAPL
// tree, the real collector reading both, the kepler-estimate binary, and a real Prometheus server.
// kepler_platform_watts is the BMC's value with Kepler 0.11's labels; the node's other part is
// platform − package − dram; workloads add up to the wall; and when the BMC hangs, frames keep their
// interval and the platform zones go stale instead of guessing.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "fakes/fake_bmc.hpp"
#include "keplershm/keplershm.hpp"
#include "support/prometheus_server.hpp"
#include "support/subprocess.hpp"
#include "support/test_frames.hpp"

using namespace estimate_test;
namespace fs = std::filesystem;

#ifdef COLLECT_BINARY
namespace {

/// The longest frame interval and whether every platform zone was stale, over `frames` frames.
struct FrameWatch {
    double longest_interval_s = 0;
    bool platform_stale = false;
    bool platform_valid = false;
};

FrameWatch watch_frames(const std::string& segment, int frames) {
    keplershm::Reader reader = keplershm::Reader::open(segment);
    FrameWatch out;
    keplershm::FrameView frame;
    const keplershm::FrameView* view = &frame;
    for (int seen = 0; seen < frames;) {
        const keplershm::Status status = reader.next(std::chrono::seconds(5), frame);
        if (status == keplershm::Status::lapped) continue;
        if (status != keplershm::Status::ok) break;
        ++seen;
        out.longest_interval_s = std::max(out.longest_interval_s, static_cast<double>(view->interval_end_ns() - view->interval_start_ns()) / 1e9);
        for (const keplershm_zone_sample& z : view->zones()) {
            if (view->segment().zones[z.zone_index].kind != KEPLERSHM_ZONE_PLATFORM) continue;
            out.platform_stale = out.platform_stale || (z.flags & KEPLERSHM_ZONE_STALE);
            out.platform_valid = out.platform_valid || (z.flags & KEPLERSHM_ZONE_VALID);
        }
    }
    return out;
}

TEST(PlatformEndToEnd, TheBmcsPowerIsTheNodesAndAHungBmcStallsNothing) {
    if (!fs::exists("/usr/bin/prometheus")) GTEST_SKIP() << "no Prometheus server (Debian package prometheus)";
    TempDir dir;
    fs::create_directories(dir.path() / "bmc");
    kepler::testing::FakeBmc bmc(kepler::testing::FakeBmcOptions{}, dir.path() / "bmc");
    bmc.set_input_watts("1U", "Bay1", 180);
    bmc.set_input_watts("1U", "Bay2", 120);
    FakeRapl rapl(dir.path() / "sys");
    std::ofstream(dir.path() / "credentials") << "admin\nsecret\n";
    const std::string segment = unique_segment_name("e2e-platform");
    const SegmentCleanup cleanup{segment};
    Child collector({COLLECT_BINARY, "--shm-name", segment, "--interval", "250ms", "--source", "procfs", "--kube", "off",
                     "--sysfs-root", (dir.path() / "sys").string(), "--replace-live", "--node-name", "node-a",
                     "--redfish-endpoint", bmc.url(), "--redfish-bmc-id", "bmc-a", "--redfish-ca-file", bmc.ca_file().string(),
                     "--redfish-credentials-file", (dir.path() / "credentials").string(), "--redfish-poll", "500ms",
                     "--redfish-timeout", "1s", "--redfish-max-age", "2s"},
                    (dir.path() / "collector.log").string());
    const int port = free_port();
    Child estimator({ESTIMATE_BINARY, "--shm-name", segment, "--listen", fmt::format("127.0.0.1:{}", port), "--metric-names", "both"},
                    (dir.path() / "estimator.log").string());
    const int prometheus_port = free_port();
    Child prometheus = start_prometheus(dir.path(), port, prometheus_port);
    const std::string bay1 = R"(kepler_platform_watts{source="redfish",node_name="node-a",bmc_id="bmc-a",chassis_id="1U",source_id="Bay1",source_type="PowerSupply"})";
    ASSERT_TRUE(wait_for([&] { return query(prometheus_port, bay1).has_value(); }, std::chrono::seconds(60)))
        << read_file((dir.path() / "collector.log").string()) << read_file((dir.path() / "estimator.log").string());

    EXPECT_NEAR(query(prometheus_port, bay1).value_or(-1), 180.0, 180 * 0.01) << "the BMC's reading, held between polls";
    EXPECT_NEAR(query(prometheus_port, "sum(kepler_platform_watts)").value_or(-1), 300.0, 300 * 0.01);
    // One scrape is one snapshot: other = platform − package − dram, and workloads add up to the wall.
    const std::string node_total = "sum(kepler_node_package_joules_total) + sum(kepler_node_dram_joules_total) + "
                                   "sum(kepler_node_other_joules_total)";
    const std::optional<double> other_gap = query(prometheus_port, "sum(kepler_node_other_joules_total) - (sum(kepler_node_platform_joules_total) "
                                                                   "- sum(kepler_node_package_joules_total) - sum(kepler_node_dram_joules_total))");
    const std::optional<double> platform = query(prometheus_port, "sum(kepler_node_platform_joules_total)");
    ASSERT_TRUE(other_gap && platform);
    EXPECT_NEAR(*other_gap, 0.0, 0.01 * *platform);
    const std::optional<double> conserved = query(prometheus_port, "sum(kepler_container_joules_total) - (" + node_total + ")");
    ASSERT_TRUE(conserved);
    EXPECT_NEAR(*conserved, 0.0, 1e-9 * *platform + 1e-6) << "containers sum to the wall";
    EXPECT_EQ(query(prometheus_port, "count(kepler_node_info{platform_power_source=\"redfish\"})"), 1.0);

    // Node power follows the BMC.
    bmc.set_input_watts("1U", "Bay2", 220);
    EXPECT_TRUE(wait_for([&] { return query(prometheus_port, "sum(kepler_platform_watts) > 399 and sum(kepler_platform_watts) < 401").has_value(); },
                         std::chrono::seconds(20)));

    // A hung BMC: frames keep their 250 ms interval; the platform zones go stale and have no watts.
    bmc.set_fault(kepler::testing::FakeBmc::Fault::hang);
    const FrameWatch hung = watch_frames(segment, 24);  // 6 s: past the 2 s max age
    EXPECT_LT(hung.longest_interval_s, 1.0) << "a frame waited for the BMC";
    EXPECT_TRUE(hung.platform_stale);
    EXPECT_TRUE(wait_for([&] { return !query(prometheus_port, "kepler_platform_watts").has_value(); }, std::chrono::seconds(20)))
        << "stale readings must not be shown as watts";
    bmc.set_fault(kepler::testing::FakeBmc::Fault::none);
    EXPECT_TRUE(wait_for([&] { return query(prometheus_port, bay1).has_value(); }, std::chrono::seconds(20))) << "the BMC came back";
    EXPECT_EQ(query(prometheus_port, "sum(resets(kepler_platform_joules_total[5m])) + sum(resets(kepler_node_other_joules_total[5m]))"), 0.0);
}

}  // namespace
#endif
