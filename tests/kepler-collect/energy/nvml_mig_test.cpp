// MIG through NVML, against the fake libnvidia-ml.so.1: instances as devices with their own processes, their
// GPU instances' activity through GPM or from dcgm-exporter (a real HTTP server), and the rescan that finds
// a GPU, a MIG layout or a mode discovery did not see.
#include "fakes/http_server.hpp"
#include "nvml_test_support.hpp"

namespace kepler::collect {
namespace {

using namespace nvml_test;
using nlohmann::json;
using testing::TempDir;

TEST(NvmlSource, MigInstancesAreDevicesWithTheirOwnProcessesAndNoBusyTime) {
    Scenario scenario(gpus({{{"power_w", 400},
                             {"mig_mode", 1},
                             {"processes", json::array({{{"pid", 999}, {"sm_util", 50}}})},  // not listed in MIG mode
                             {"mig_devices",
                              json::array({{{"uuid", "MIG-11111111-0000-0000-0000-000000000001"},
                                            {"gpu_instance_id", 1}, {"compute_instance_id", 0},
                                            {"processes", json::array({{{"pid", 2001}, {"sm_util", 50}, {"used_memory_bytes", 1000}}})}},
                                           {{"uuid", "MIG-11111111-0000-0000-0000-000000000002"},
                                            {"gpu_instance_id", 2}, {"compute_instance_id", 0},
                                            {"processes", json::array({{{"pid", 2002}, {"sm_util", 25}, {"used_memory_bytes", 3000}},
                                                                       {{"pid", 2003}, {"type", "graphics"}, {"used_memory_bytes", 500}}})}}})}}}));
    const auto source = load();
    ASSERT_NE(source, nullptr);
    EXPECT_EQ(source->zones().size(), 1u) << "an instance has no zone of its own";
    const auto& devices = source->devices();
    ASSERT_EQ(devices.size(), 3u);
    EXPECT_TRUE(devices[0].flags & KEPLERSHM_GPU_MIG_ENABLED);
    EXPECT_FALSE(devices[0].flags & KEPLERSHM_GPU_MIG_INSTANCE);
    EXPECT_EQ(devices[0].parent, kNone);
    for (uint32_t m = 1; m <= 2; ++m) {
        EXPECT_TRUE(devices[m].flags & KEPLERSHM_GPU_MIG_INSTANCE) << m;
        EXPECT_FALSE(devices[m].flags & KEPLERSHM_GPU_MIG_ENABLED) << m;
        EXPECT_EQ(devices[m].parent, 0u);
        EXPECT_EQ(devices[m].zone_index, 0u) << "an instance's energy is its GPU's zone";
        EXPECT_EQ(devices[m].gpu_instance_id, m);
        EXPECT_EQ(devices[m].compute_instance_id, 0u);
        EXPECT_EQ(devices[m].vendor, static_cast<uint32_t>(KEPLERSHM_GPU_NVIDIA));
        EXPECT_EQ(devices[m].device_index, 0u) << "the GPU's NVML index";
    }
    EXPECT_EQ(keplershm::get_text(devices[1].uuid), "MIG-11111111-0000-0000-0000-000000000001");
    EXPECT_EQ(keplershm::get_text(devices[2].uuid), "MIG-11111111-0000-0000-0000-000000000002");

    std::vector<GpuProcessUse> uses;
    for (int call = 0; call < 2; ++call) {  // the second call is past any starting point: still no busy time
        read(*source);
        source->read_usage(uses, monotonic_now_ns());
        auto use = by_pid(uses);
        ASSERT_EQ(use.size(), 3u) << "the instances' processes, not the GPU's own list";
        EXPECT_EQ(use[2001].device, 1u);
        EXPECT_EQ(use[2002].device, 2u);
        EXPECT_EQ(use[2003].device, 2u);
        EXPECT_EQ(use[2001].memory_bytes, 1000u);
        EXPECT_EQ(use[2003].flags & KEPLERSHM_GPU_USE_GRAPHICS, uint32_t{KEPLERSHM_GPU_USE_GRAPHICS});
        for (const auto& [pid, u] : use) {
            EXPECT_FALSE(u.flags & KEPLERSHM_GPU_USE_BUSY_VALID) << "the driver samples no utilization under MIG";
            EXPECT_EQ(u.busy_ns, 0u);
        }
        EXPECT_TRUE(devices[1].flags & KEPLERSHM_GPU_USAGE_VALID);
        EXPECT_TRUE(devices[2].flags & KEPLERSHM_GPU_USAGE_VALID);
        EXPECT_EQ(devices[1].memory_used_bytes, 1000u);
        EXPECT_EQ(devices[2].memory_used_bytes, 3500u);
        EXPECT_EQ(devices[0].memory_used_bytes, 4500u) << "the GPU holds its instances' memory";
        testing::sleep_ms(150);
    }
}

json mig_gpu_with_gpm(bool gpm, double gi1_percent, double gi2_percent) {
    auto instance = [](unsigned gi, unsigned ci, double percent, unsigned pid) {
        return json{{"gpu_instance_id", gi}, {"compute_instance_id", ci}, {"gr_active_percent", percent},
                    {"processes", json::array({{{"pid", pid}}})}};
    };
    // GPU instance 2 holds two compute instances: one activity for both.
    return gpus({{{"power_w", 400}, {"mig_mode", 1}, {"gpm", gpm},
                  {"mig_devices", json::array({instance(1, 0, gi1_percent, 3001), instance(2, 0, gi2_percent, 3002),
                                               instance(2, 1, gi2_percent, 3003)})}}});
}

TEST(NvmlSource, MigInstancesActivityComesFromGpmPerGpuInstance) {
    Scenario scenario(mig_gpu_with_gpm(true, 60, 20));
    const auto source = load();
    ASSERT_NE(source, nullptr);
    const auto& devices = source->devices();
    ASSERT_EQ(devices.size(), 4u);
    std::vector<GpuProcessUse> uses;
    read(*source);
    source->read_usage(uses, monotonic_now_ns());
    for (uint32_t m = 1; m <= 3; ++m) EXPECT_FALSE(devices[m].flags & KEPLERSHM_GPU_ACTIVE_VALID) << "one sample is no span yet";

    const auto started = Clock::now();
    testing::sleep_ms(300);
    read(*source);
    source->read_usage(uses, monotonic_now_ns());
    const double elapsed_ns = std::chrono::duration<double, std::nano>(Clock::now() - started).count();
    for (uint32_t m = 1; m <= 3; ++m) ASSERT_TRUE(devices[m].flags & KEPLERSHM_GPU_ACTIVE_VALID) << m;
    EXPECT_FALSE(devices[0].flags & KEPLERSHM_GPU_ACTIVE_VALID) << "the GPU itself is not measured by GPM here";
    // The span is between the collector's two samples, which the test's clock brackets; a stalled thread
    // could stretch it past elapsed_ns by the stall, hence the share's upper bound of 1.5x.
    const double share1 = static_cast<double>(devices[1].active_ns) / elapsed_ns;
    EXPECT_GT(share1, 0.6 * 0.8);
    EXPECT_LT(share1, 0.6 * 1.5);
    EXPECT_EQ(devices[2].active_ns, devices[3].active_ns) << "two compute instances of one GPU instance";
    ASSERT_GT(devices[2].active_ns, 0u);
    EXPECT_NEAR(static_cast<double>(devices[1].active_ns) / static_cast<double>(devices[2].active_ns), 3.0, 0.05)
        << "60 % against 20 % over the same span (the instances are sampled microseconds apart)";

    // The activity changes: the next interval measures the new figures.
    scenario.write(mig_gpu_with_gpm(true, 0, 100));
    read(*source);
    source->read_usage(uses, monotonic_now_ns());  // the interval that straddles the change
    testing::sleep_ms(200);
    read(*source);
    source->read_usage(uses, monotonic_now_ns());
    EXPECT_EQ(devices[1].active_ns, 0u) << "an idle instance";
    EXPECT_GT(devices[2].active_ns, 150'000'000u) << "a busy one: the whole span (at least the 200 ms slept)";
}

TEST(NvmlSource, WithoutGpmOrOnAnOldDriverMigInstancesHaveNoActivity) {
    for (const char* library : {FAKE_NVML_LIBRARY, FAKE_NVML_OLD_LIBRARY}) {
        SCOPED_TRACE(library);
        Scenario scenario(mig_gpu_with_gpm(library == std::string(FAKE_NVML_LIBRARY) ? false : true, 60, 20));
        const auto source = load(library);
        ASSERT_NE(source, nullptr);
        std::vector<GpuProcessUse> uses;
        for (int call = 0; call < 2; ++call) {
            read(*source);
            source->read_usage(uses, monotonic_now_ns());
            testing::sleep_ms(120);
        }
        for (const keplershm_gpu_device& d : source->devices()) EXPECT_FALSE(d.flags & KEPLERSHM_GPU_ACTIVE_VALID);
    }
}

TEST(NvmlSource, WithoutGpmMigInstancesActivityComesFromDcgmExporter) {
    Scenario scenario(mig_gpu_with_gpm(false, 0, 0));  // no GPM: the figures come from the exporter only
    const std::string body = testing::fixture("dcgm_exporter_mig.txt");  // GPU 0: GI 1 at 0.6, GI 2 at 0.2
    kepler::testing::FakeHttpServer exporter(
        [&](const kepler::testing::FakeHttpServer::Request&) { return kepler::testing::FakeHttpServer::Response{200, body, {}}; });
    NvmlSettings settings = nvml_at(FAKE_NVML_LIBRARY);
    settings.dcgm_endpoint = exporter.url();
    settings.dcgm_refresh = std::chrono::milliseconds(20);
    std::string why;
    const std::unique_ptr<GpuSource> source = make_nvml_source(settings, why);
    ASSERT_NE(source, nullptr) << why;
    const auto& devices = source->devices();
    ASSERT_EQ(devices.size(), 4u);
    std::vector<GpuProcessUse> uses;
    // Reads until the exporter's first answer is in and one interval after it was measured.
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    Clock::time_point last;
    while (!(devices[1].flags & KEPLERSHM_GPU_ACTIVE_VALID) && Clock::now() < deadline) {
        last = Clock::now();
        source->read_usage(uses, monotonic_now_ns());
        testing::sleep_ms(50);
    }
    testing::sleep_ms(200);
    const auto before = Clock::now();
    source->read_usage(uses, monotonic_now_ns());
    const double span_ns = std::chrono::duration<double, std::nano>(before - last).count();
    for (uint32_t m = 1; m <= 3; ++m) ASSERT_TRUE(devices[m].flags & KEPLERSHM_GPU_ACTIVE_VALID) << m;
    ASSERT_GT(devices[2].active_ns, 0u);
    EXPECT_NEAR(static_cast<double>(devices[1].active_ns) / static_cast<double>(devices[2].active_ns), 3.0, 0.05);
    EXPECT_EQ(devices[2].active_ns, devices[3].active_ns) << "two compute instances of one GPU instance";
    // The span runs from the previous read_usage to this one, which the test's clock brackets from outside.
    EXPECT_LT(static_cast<double>(devices[1].active_ns), 0.6 * span_ns * 1.05);
    EXPECT_GT(static_cast<double>(devices[1].active_ns), 0.6 * 200e6);
}

TEST(NvmlSource, NewDevicesAreAGpuMigLayoutOrModeDiscoveryDidNotSeeNeverOneThatWentAway) {
    Scenario scenario(mig_gpu_with_gpm(false, 0, 0));
    const auto source = load();
    ASSERT_NE(source, nullptr);
    EXPECT_FALSE(source->new_devices()) << "the node as discovered";
    json more = mig_gpu_with_gpm(false, 0, 0);
    more["devices"].push_back({{"power_w", 100}});
    scenario.write(more);
    EXPECT_TRUE(source->new_devices()) << "a second GPU";
    json relaid = mig_gpu_with_gpm(false, 0, 0);
    relaid["devices"][0]["mig_devices"].push_back({{"gpu_instance_id", 9}, {"compute_instance_id", 0}});
    scenario.write(relaid);
    EXPECT_TRUE(source->new_devices()) << "a new MIG instance";
    json whole = mig_gpu_with_gpm(false, 0, 0);
    whole["devices"][0]["mig_mode"] = 0;
    scenario.write(whole);
    EXPECT_TRUE(source->new_devices()) << "MIG turned off: the whole GPU is a device of another kind";
    json fewer = mig_gpu_with_gpm(false, 0, 0);
    fewer["devices"][0]["mig_devices"].erase(2);
    scenario.write(fewer);
    EXPECT_FALSE(source->new_devices()) << "an instance gone keeps its record, without users";
    scenario.write(gpus({}));
    EXPECT_FALSE(source->new_devices()) << "a GPU gone is LOST, not new";
    EXPECT_FALSE(nvml_finds_gpus(nvml_at(FAKE_NVML_LIBRARY))) << "no GPU now";
    scenario.write(gpus({{{"power_w", 10},
                          {"errors", {{"nvmlDeviceGetTotalEnergyConsumption", 3}, {"nvmlDeviceGetPowerUsage", 3}}}}}));
    EXPECT_FALSE(nvml_finds_gpus(nvml_at(FAKE_NVML_LIBRARY))) << "a GPU it cannot read is left out: nothing to publish";
    scenario.write(gpus({{{"power_w", 10}}}));
    EXPECT_TRUE(nvml_finds_gpus(nvml_at(FAKE_NVML_LIBRARY)));
}

}  // namespace
}  // namespace kepler::collect
