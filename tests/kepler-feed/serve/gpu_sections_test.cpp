// GPUs through the feed: the real collector reads two GPUs from the fake libnvidia-ml.so.1 (tests/fakes/
// nvml), and a subscriber that selects gpu_devices and gpu_usage receives exactly what a local reader reads
// for the same frames: each device and each (process, device) use, every field.
#include <gtest/gtest.h>

#include <unistd.h>

#include <set>

#include "scenario_env.hpp"
#include "support/feed_fixture.hpp"

namespace feed_test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUuid0 = "GPU-feed0000-0000-4000-8000-000000000000";
constexpr const char* kUuid1 = "GPU-feed0000-0000-4000-8000-000000000001";

TEST(FeedGpuSections, DevicesAndUsageEqualTheLocalReaderForTheSameSequences) {
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("feed-gpu");
    // This test process is the GPU user on both devices (NVML lists pids; the collector finds them in /proc).
    const fs::path scenario = tmp / "scenario.json";
    auto device = [](const char* uuid, int watts, unsigned sm_util, uint64_t memory) {
        return nlohmann::json{{"uuid", uuid}, {"name", "NVIDIA H100 80GB HBM3"}, {"power_w", watts}, {"power_limit_w", 700},
                              {"processes", nlohmann::json::array({{{"pid", getpid()}, {"type", "compute"},
                                                                    {"used_memory_bytes", memory}, {"sm_util", sm_util}}})}};
    };
    fake_nvml::write_scenario(scenario, {{"devices", {device(kUuid0, 300, 60, 1ull << 30), device(kUuid1, 90, 20, 2ull << 30)}}});
    const fake_nvml::ScenarioEnv env(scenario);
    const auto collector = start_collector(tmp, name, "100ms", "collect.log", {"--nvml-library", FAKE_NVML_LIBRARY});
    Feed feed(tmp, name);
    ASSERT_NE(feed.port(), 0) << feed.log();
    const auto stub = connect(feed.target());
    ASSERT_TRUE(wait_for_frames(*stub)) << feed.log() << collector->log();

    LocalReader local(name);
    ASSERT_NE(local.reader, nullptr);
    Stream stream = subscribe(*stub, request_for({"gpu_devices", "gpu_usage"}));
    v1::Frame frame;
    int with_usage = 0;
    for (int n = 0; n < 20 && with_usage < 3; ++n) {
        ASSERT_TRUE(stream.read(frame)) << stream.finish().error_message() << collector->log();
        keplershm_view view{};
        view.sz = sizeof view;
        ASSERT_EQ(keplershm_reader_copy(local.reader, frame.sequence(), &view), KEPLERSHM_OK) << frame.sequence();
        std::set<std::string> names;
        for (const v1::Section& section : frame.sections()) {
            names.insert(section.name());
            EXPECT_EQ(compare_section(section, local.reader, view), "") << section.name() << ", frame " << frame.sequence();
        }
        EXPECT_EQ(names, (std::set<std::string>{"gpu_devices", "gpu_usage"})) << "only what was asked";
        const v1::Section* devices = find_section(frame, "gpu_devices");
        ASSERT_NE(devices, nullptr);
        EXPECT_EQ(devices->rows(), 2u) << collector->log();
        const v1::Section* usage = find_section(frame, "gpu_usage");
        if (usage != nullptr && usage->rows() == 2) ++with_usage;  // utilization samples need an interval first
    }
    EXPECT_EQ(with_usage, 3) << "this process's use of both GPUs arrives\n" << collector->log();
}

}  // namespace
}  // namespace feed_test
