// NVIDIA GPUs through NVML, against the fake libnvidia-ml.so.1 (tests/fakes/nvml) loaded with dlopen as
// the driver's would be: discovery and device facts, energy from the driver's counter (or power integrated
// on an old driver), a lost GPU, a driver reload and NVML errors each costing one interval and nothing
// else, per-process use (SM time from utilization samples, memory, compute/graphics), and the GPU source
// inside an EnergyMeter beside other zones. MIG is nvml_mig_test.cpp's.
#include <algorithm>

#include "energy/energy.hpp"
#include "nvml_test_support.hpp"

namespace kepler::collect {
namespace {

using namespace nvml_test;
using nlohmann::json;
using testing::TempDir;

TEST(NvmlSource, NoLibraryAtThePathIsNoSourceAndSaysWhichPath) {
    const std::string path = "/nonexistent/kepler-test/libnvidia-ml.so.1";
    std::string why;
    EXPECT_EQ(make_nvml_source(nvml_at(path), why), nullptr);
    EXPECT_NE(why.find(path), std::string::npos) << why;
}

TEST(NvmlSource, DriverNotLoadedIsNoSourceAndSaysSo) {
    unsetenv("FAKE_NVML_SCENARIO");  // the fake's nvmlInit answers NVML_ERROR_DRIVER_NOT_LOADED
    std::string why;
    EXPECT_EQ(make_nvml_source(nvml_at(FAKE_NVML_LIBRARY), why), nullptr);
    EXPECT_NE(why.find("Driver Not Loaded"), std::string::npos) << why;
    EXPECT_NE(why.find("nvmlInit"), std::string::npos) << why;
}

TEST(NvmlSource, NoGpuIsNoSource) {
    Scenario scenario(gpus({}));
    std::string why;
    EXPECT_EQ(make_nvml_source(nvml_at(FAKE_NVML_LIBRARY), why), nullptr);
    EXPECT_NE(why.find("no GPU"), std::string::npos) << why;
}

TEST(NvmlSource, TwoGpusAreZonesAndDevicesWithEnergyFromTheCounter) {
    Scenario scenario(gpus({{{"uuid", "GPU-aaaaaaaa-0000-0000-0000-000000000001"}, {"name", "NVIDIA H100 80GB HBM3"},
                             {"pci_bus_id", "00000000:17:00.0"}, {"power_w", 300}, {"power_limit_w", 700}},
                            {{"uuid", "GPU-aaaaaaaa-0000-0000-0000-000000000002"}, {"name", "NVIDIA L4"},
                             {"pci_bus_id", "00000000:65:00.0"}, {"power_w", 60}, {"power_limit_w", 72}}}));
    const auto source = load();
    ASSERT_NE(source, nullptr);
    const auto& zones = source->zones();
    ASSERT_EQ(zones.size(), 2u);
    for (uint32_t i = 0; i < 2; ++i) {
        EXPECT_EQ(keplershm::get_text(zones[i].name), "gpu-" + std::to_string(i));
        EXPECT_EQ(zones[i].kind, static_cast<uint32_t>(KEPLERSHM_ZONE_GPU));
        EXPECT_EQ(zones[i].power_source, static_cast<uint32_t>(KEPLERSHM_POWER_NVML));
        EXPECT_EQ(zones[i].socket, i);
    }
    const auto& devices = source->devices();
    ASSERT_EQ(devices.size(), 2u);
    EXPECT_EQ(keplershm::get_text(devices[0].uuid), "GPU-aaaaaaaa-0000-0000-0000-000000000001");
    EXPECT_EQ(keplershm::get_text(devices[0].name), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(keplershm::get_text(devices[0].pci_bus_id), "00000000:17:00.0");
    EXPECT_EQ(devices[0].power_limit_mw, 700'000u);
    EXPECT_EQ(keplershm::get_text(devices[1].uuid), "GPU-aaaaaaaa-0000-0000-0000-000000000002");
    EXPECT_EQ(keplershm::get_text(devices[1].name), "NVIDIA L4");
    EXPECT_EQ(keplershm::get_text(devices[1].pci_bus_id), "00000000:65:00.0");
    EXPECT_EQ(devices[1].power_limit_mw, 72'000u);
    for (uint32_t i = 0; i < 2; ++i) {
        EXPECT_EQ(devices[i].vendor, static_cast<uint32_t>(KEPLERSHM_GPU_NVIDIA));
        EXPECT_EQ(devices[i].device_index, i);
        EXPECT_EQ(devices[i].zone_index, i);
        EXPECT_EQ(devices[i].parent, kNone);
        EXPECT_EQ(devices[i].gpu_instance_id, kNone);
        EXPECT_EQ(devices[i].compute_instance_id, kNone);
        EXPECT_EQ(devices[i].flags & (KEPLERSHM_GPU_MIG_ENABLED | KEPLERSHM_GPU_MIG_INSTANCE | KEPLERSHM_GPU_LOST), 0u);
    }

    const auto baseline = read(*source);
    for (const auto& s : baseline) {
        EXPECT_FALSE(valid(s)) << "the first reading is a baseline";
        EXPECT_EQ(s.energy_delta_uj, 0u);
    }
    testing::sleep_ms(300);
    const auto second = read(*source);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_TRUE(valid(second[i]));
        EXPECT_FALSE(second[i].flags & KEPLERSHM_ZONE_INTEGRATED) << "the driver's counter, not integrated";
        EXPECT_EQ(second[i].energy_total_uj, second[i].energy_delta_uj);
    }
    // The fake's counter is power × its own monotonic time, read a few µs before the source stamps
    // read_time_ns: only a stall between the two skews the ratio, and 10 % of 300 ms is a 30 ms stall.
    EXPECT_NEAR(watts(second[0], baseline[0]), 300.0, 30.0);
    EXPECT_NEAR(watts(second[1], baseline[1]), 60.0, 6.0);
    // Both intervals are nearly the same 300 ms, so the energies compare as the powers do.
    EXPECT_NEAR(static_cast<double>(second[0].energy_delta_uj) / static_cast<double>(second[1].energy_delta_uj), 5.0, 0.5);
}

TEST(NvmlSource, OldDriverWithoutTheCounterIntegratesPower) {
    Scenario scenario(gpus({{{"power_w", 250}}}));
    const auto source = load(FAKE_NVML_OLD_LIBRARY);
    ASSERT_NE(source, nullptr);
    ASSERT_EQ(source->zones().size(), 1u);
    EXPECT_EQ(source->devices()[0].flags & KEPLERSHM_GPU_MIG_ENABLED, 0u) << "no MIG calls in an old driver";
    const auto baseline = read(*source);
    EXPECT_FALSE(valid(baseline[0]));
    testing::sleep_ms(300);
    const auto second = read(*source);
    EXPECT_TRUE(valid(second[0]));
    EXPECT_TRUE(second[0].flags & KEPLERSHM_ZONE_INTEGRATED);
    // Constant power integrated over exactly the read times: the tolerance is only for rounding.
    EXPECT_NEAR(watts(second[0], baseline[0]), 250.0, 25.0);
}

TEST(NvmlSource, CurrentDriverWithoutACounterOnThisGpuIntegratesItsPower) {
    Scenario scenario(gpus({{{"power_w", 100}}, {{"power_w", 40}, {"energy", "unsupported"}}}));
    const auto source = load();
    ASSERT_NE(source, nullptr);
    read(*source);
    testing::sleep_ms(200);
    const auto second = read(*source);
    ASSERT_TRUE(valid(second[0]) && valid(second[1]));
    EXPECT_FALSE(second[0].flags & KEPLERSHM_ZONE_INTEGRATED);
    EXPECT_TRUE(second[1].flags & KEPLERSHM_ZONE_INTEGRATED);
}

TEST(NvmlSource, LostGpuIsOneInvalidIntervalThenABaselineAndTheOtherGpuGoesOn) {
    json scenario_json = gpus({{{"power_w", 200}, {"processes", json::array({{{"pid", 4242}, {"sm_util", 30}}})}},
                               {{"power_w", 100}, {"processes", json::array({{{"pid", 4343}, {"sm_util", 30}}})}}});
    Scenario scenario(scenario_json);
    const auto source = load();
    ASSERT_NE(source, nullptr);
    std::vector<uint64_t> totals(2, 0);
    std::vector<GpuProcessUse> uses;
    auto step = [&](const char* what) {
        testing::sleep_ms(100);
        auto samples = read(*source);
        source->read_usage(uses, monotonic_now_ns());
        for (size_t i = 0; i < 2; ++i) {
            EXPECT_GE(samples[i].energy_total_uj, totals[i]) << "GPU " << i << ": the total stepped back at " << what;
            totals[i] = samples[i].energy_total_uj;
        }
        return samples;
    };
    step("baseline");
    auto s = step("valid");
    ASSERT_TRUE(valid(s[0]) && valid(s[1]));
    ASSERT_TRUE(source->devices()[1].flags & KEPLERSHM_GPU_USAGE_VALID);

    scenario_json["devices"][1]["lost"] = true;
    scenario.write(scenario_json);
    s = step("lost");
    EXPECT_TRUE(valid(s[0])) << "the other GPU is unaffected";
    EXPECT_FALSE(source->devices()[0].flags & KEPLERSHM_GPU_LOST);
    EXPECT_FALSE(valid(s[1]));
    EXPECT_EQ(s[1].energy_delta_uj, 0u);
    EXPECT_TRUE(source->devices()[1].flags & KEPLERSHM_GPU_LOST);
    // PROTOCOL.md §6.1: USAGE_VALID says this interval's GPU_USAGE records are all of the device's users;
    // a lost GPU's users were not read, so it must not claim that (readers would think it idle).
    EXPECT_FALSE(source->devices()[1].flags & KEPLERSHM_GPU_USAGE_VALID);
    EXPECT_TRUE(std::none_of(uses.begin(), uses.end(), [](const GpuProcessUse& u) { return u.device == 1; }));
    EXPECT_TRUE(std::any_of(uses.begin(), uses.end(), [](const GpuProcessUse& u) { return u.pid == 4242; }));
    s = step("still lost");
    EXPECT_FALSE(valid(s[1]));

    scenario_json["devices"][1]["lost"] = false;
    scenario.write(scenario_json);
    s = step("back");
    EXPECT_FALSE(valid(s[1])) << "the first reading after the loss is a new baseline: the gap's energy is unknown";
    EXPECT_FALSE(source->devices()[1].flags & KEPLERSHM_GPU_LOST);
    EXPECT_TRUE(source->devices()[1].flags & KEPLERSHM_GPU_USAGE_VALID);
    EXPECT_TRUE(valid(s[0]));
    s = step("valid again");
    EXPECT_TRUE(valid(s[1]));
    EXPECT_TRUE(valid(s[0]));
}

TEST(NvmlSource, DriverReloadLeavesOneIntervalOutAndTheTotalNeverStepsBack) {
    json scenario_json = gpus({{{"power_w", 150}, {"energy_offset_mj", 5'000'000}}});
    Scenario scenario(scenario_json);
    const auto source = load();
    ASSERT_NE(source, nullptr);
    read(*source);
    testing::sleep_ms(100);
    const auto before = read(*source);
    ASSERT_TRUE(valid(before[0]));
    ASSERT_GT(before[0].energy_total_uj, 0u);

    // The driver reloaded: its counter starts over (from 0 and without the offset, far below the last value).
    scenario_json["devices"][0]["driver_generation"] = 1;
    scenario_json["devices"][0]["energy_offset_mj"] = 0;
    scenario.write(scenario_json);
    testing::sleep_ms(100);
    const auto reload = read(*source);
    EXPECT_FALSE(valid(reload[0])) << "the interval across the reload is unknown";
    EXPECT_EQ(reload[0].energy_delta_uj, 0u);
    EXPECT_EQ(reload[0].energy_total_uj, before[0].energy_total_uj) << "total unchanged";
    testing::sleep_ms(200);
    const auto after = read(*source);
    EXPECT_TRUE(valid(after[0])) << "the reading after the reload was the new baseline";
    EXPECT_NEAR(watts(after[0], reload[0]), 150.0, 15.0);  // a 20 ms stall at most, as above
    EXPECT_EQ(after[0].energy_total_uj, before[0].energy_total_uj + after[0].energy_delta_uj);
}

TEST(NvmlSource, NvmlErrorOnTheEnergyCounterLeavesOneIntervalOutAndReadingGoesOn) {
    json scenario_json = gpus({{{"power_w", 120}}, {{"power_w", 80}}});
    Scenario scenario(scenario_json);
    const auto source = load();
    ASSERT_NE(source, nullptr);
    read(*source);
    testing::sleep_ms(100);
    const auto good = read(*source);
    ASSERT_TRUE(valid(good[0]) && valid(good[1]));

    scenario_json["devices"][0]["errors"] = {{"nvmlDeviceGetTotalEnergyConsumption", 999}};  // NVML_ERROR_UNKNOWN
    scenario.write(scenario_json);
    testing::sleep_ms(100);
    const auto failed = read(*source);
    EXPECT_FALSE(valid(failed[0]));
    EXPECT_EQ(failed[0].energy_delta_uj, 0u);
    EXPECT_EQ(failed[0].energy_total_uj, good[0].energy_total_uj);
    EXPECT_FALSE(source->devices()[0].flags & KEPLERSHM_GPU_LOST) << "an error is not a lost GPU";
    EXPECT_TRUE(valid(failed[1]));

    scenario_json["devices"][0].erase("errors");
    scenario.write(scenario_json);
    testing::sleep_ms(100);
    EXPECT_FALSE(valid(read(*source)[0])) << "the first good reading after an error is a baseline";
    testing::sleep_ms(100);
    const auto again = read(*source);
    EXPECT_TRUE(valid(again[0]));
    EXPECT_TRUE(valid(again[1]));
    EXPECT_GE(again[0].energy_total_uj, good[0].energy_total_uj);
}

TEST(NvmlSource, ProcessesWithTheirSmTimeMemoryAndContexts) {
    constexpr uint64_t kGiB = 1ull << 30;
    Scenario scenario(gpus({{{"power_w", 200},
                             {"processes", json::array({{{"pid", 1001}, {"type", "compute"}, {"sm_util", 40}, {"used_memory_bytes", 2 * kGiB}},
                                                        {{"pid", 1002}, {"type", "compute"}, {"sm_util", 20}, {"used_memory_bytes", 1 * kGiB}},
                                                        {{"pid", 1003}, {"type", "graphics"}, {"used_memory_bytes", 512ull << 20}}})}}}));
    const auto source = load();
    ASSERT_NE(source, nullptr);
    std::vector<GpuProcessUse> uses;
    read(*source);
    source->read_usage(uses, monotonic_now_ns());
    const Clock::time_point start = Clock::now();
    auto first = by_pid(uses);
    ASSERT_EQ(first.size(), 3u);
    for (const auto& [pid, use] : first) {
        EXPECT_FALSE(use.flags & KEPLERSHM_GPU_USE_BUSY_VALID) << "the first call only sets the starting point";
        EXPECT_EQ(use.busy_ns, 0u);
    }
    EXPECT_TRUE(source->devices()[0].flags & KEPLERSHM_GPU_USAGE_VALID);

    testing::sleep_ms(600);
    read(*source);
    source->read_usage(uses, monotonic_now_ns());
    const double elapsed_ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    auto second = by_pid(uses);
    ASSERT_EQ(second.size(), 3u);
    for (const auto& [pid, use] : second) {
        EXPECT_TRUE(use.flags & KEPLERSHM_GPU_USE_BUSY_VALID) << pid;
        EXPECT_EQ(use.device, 0u);
    }
    EXPECT_EQ(second[1001].flags & (KEPLERSHM_GPU_USE_COMPUTE | KEPLERSHM_GPU_USE_GRAPHICS), uint32_t{KEPLERSHM_GPU_USE_COMPUTE});
    EXPECT_EQ(second[1002].flags & (KEPLERSHM_GPU_USE_COMPUTE | KEPLERSHM_GPU_USE_GRAPHICS), uint32_t{KEPLERSHM_GPU_USE_COMPUTE});
    EXPECT_EQ(second[1003].flags & (KEPLERSHM_GPU_USE_COMPUTE | KEPLERSHM_GPU_USE_GRAPHICS), uint32_t{KEPLERSHM_GPU_USE_GRAPHICS});
    EXPECT_EQ(second[1001].memory_bytes, 2 * kGiB);
    EXPECT_EQ(second[1002].memory_bytes, 1 * kGiB);
    EXPECT_EQ(second[1003].memory_bytes, 512ull << 20);
    EXPECT_EQ(second[1003].busy_ns, 0u) << "never sampled busy";
    ASSERT_GT(second[1002].busy_ns, 0u);
    // Both are summed over the same samples and spans, so only the 40:20 shares differ.
    EXPECT_NEAR(static_cast<double>(second[1001].busy_ns) / static_cast<double>(second[1002].busy_ns), 2.0, 0.4);
    // The samples reach from the first call to the last 100 ms sampling time before the second call: up to
    // 100 ms short of the ~600 ms measured here (−17 %), plus stalls on a busy machine, so ±30 %.
    EXPECT_NEAR(static_cast<double>(second[1001].busy_ns), 0.4 * elapsed_ns, 0.3 * 0.4 * elapsed_ns);
    EXPECT_TRUE(source->devices()[0].flags & KEPLERSHM_GPU_USAGE_VALID);
    EXPECT_EQ(source->devices()[0].memory_used_bytes, 3 * kGiB + (512ull << 20));
}

TEST(NvmlSource, AProcessListThatFailsLeavesTheUsersUnknownAndAnUnsupportedOneDoesNot) {
    json scenario_json = gpus({{{"power_w", 100}, {"processes", json::array({{{"pid", 1001}, {"type", "compute"}, {"sm_util", 10}}})}}});
    for (const auto& [code, complete] : {std::pair{999, false}, std::pair{3, true}}) {  // NVML_ERROR_UNKNOWN, NOT_SUPPORTED
        SCOPED_TRACE(code);
        scenario_json["devices"][0]["errors"] = {{"nvmlDeviceGetGraphicsRunningProcesses_v3", code}};
        Scenario scenario(scenario_json);
        const auto source = load();
        ASSERT_NE(source, nullptr);
        std::vector<GpuProcessUse> uses;
        source->read_usage(uses, monotonic_now_ns());
        EXPECT_EQ(by_pid(uses).count(1001), 1u) << "the compute list still names its process";
        EXPECT_EQ((source->devices()[0].flags & KEPLERSHM_GPU_USAGE_VALID) != 0, complete)
            << "a failed list may have missed a user: the GPU is not 'used by these alone'";
    }
}

void rapl_package(const TempDir& sys, uint64_t energy_uj) {
    sys.write("class/powercap/intel-rapl:0/name", "package-0\n");
    sys.write("class/powercap/intel-rapl:0/energy_uj", std::to_string(energy_uj) + "\n");
    sys.write("class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850\n");
}

TEST(NvmlSource, ThroughTheEnergyMeterDeviceZonesAreTheMetersNumbering) {
    TempDir sys;
    rapl_package(sys, 1'000'000);
    Scenario scenario(gpus({{{"power_w", 100}, {"processes", json::array({{{"pid", 3001}, {"sm_util", 10}}})}},
                            {{"power_w", 50},
                             {"mig_mode", 1},
                             {"mig_devices", json::array({{{"gpu_instance_id", 3}, {"compute_instance_id", 0},
                                                           {"processes", json::array({{{"pid", 3002}}})}}})}}}));
    EnergyMeter meter = EnergyMeter::discover(sys.path());
    ASSERT_EQ(meter.zone_infos().size(), 1u);
    meter.add_gpu_source(load());
    EXPECT_EQ(meter.gpu_device_count(), 3u);
    const auto infos = meter.zone_infos();
    ASSERT_EQ(infos.size(), 3u);
    EXPECT_EQ(meter.power_source(), static_cast<uint32_t>(KEPLERSHM_POWER_RAPL)) << "the CPU's meter first";

    testing::sleep_ms(100);
    const auto samples = meter.read();
    ASSERT_EQ(samples.size(), 3u);
    EXPECT_TRUE(valid(samples[1]) && valid(samples[2])) << "add_gpu_source took the baseline";
    std::vector<keplershm_gpu_device> devices;
    std::vector<GpuProcessUse> uses;
    meter.read_gpus(devices, uses, monotonic_now_ns());
    ASSERT_EQ(devices.size(), 3u);
    for (size_t d = 0; d < devices.size(); ++d) {
        ASSERT_LT(devices[d].zone_index, infos.size());
        EXPECT_EQ(keplershm::get_text(infos[devices[d].zone_index].name), "gpu-" + std::to_string(devices[d].device_index))
            << "device record " << d;
        EXPECT_EQ(infos[devices[d].zone_index].kind, static_cast<uint32_t>(KEPLERSHM_ZONE_GPU));
    }
    EXPECT_EQ(devices[0].zone_index, 1u);
    EXPECT_EQ(devices[1].zone_index, 2u);
    EXPECT_EQ(devices[2].zone_index, 2u) << "the instance shares its GPU's zone";
    EXPECT_EQ(devices[2].parent, 1u);
    auto use = by_pid(uses);
    EXPECT_EQ(use[3001].device, 0u);
    EXPECT_EQ(use[3002].device, 2u);
}

TEST(NvmlSource, ASecondGpuSourceIsNumberedAfterTheFirst) {
    // Two sources on the same fake (NVML counts its inits): the second's zones, devices, parents and uses
    // move past the first's, as any later GPU source's would.
    TempDir sys;  // no meter: the GPUs are the only zones
    Scenario scenario(gpus({{{"power_w", 70},
                             {"mig_mode", 1},
                             {"mig_devices", json::array({{{"gpu_instance_id", 5}, {"compute_instance_id", 1},
                                                           {"processes", json::array({{{"pid", 4001}}})}}})}}}));
    EnergyMeter meter = EnergyMeter::discover(sys.path());
    ASSERT_TRUE(meter.empty());
    meter.add_gpu_source(load());
    meter.add_gpu_source(load());
    ASSERT_EQ(meter.zone_infos().size(), 2u);
    EXPECT_EQ(meter.gpu_device_count(), 4u);
    meter.read();
    std::vector<keplershm_gpu_device> devices;
    std::vector<GpuProcessUse> uses;
    meter.read_gpus(devices, uses, monotonic_now_ns());
    ASSERT_EQ(devices.size(), 4u);
    EXPECT_EQ(devices[0].zone_index, 0u);
    EXPECT_EQ(devices[1].zone_index, 0u);
    EXPECT_EQ(devices[1].parent, 0u);
    EXPECT_EQ(devices[2].zone_index, 1u);
    EXPECT_EQ(devices[3].zone_index, 1u);
    EXPECT_EQ(devices[3].parent, 2u);
    ASSERT_EQ(uses.size(), 2u);
    EXPECT_EQ(uses[0].device, 1u);
    EXPECT_EQ(uses[1].device, 3u);
}

}  // namespace
}  // namespace kepler::collect
