// NVIDIA GPUs through NVML, against the fake libnvidia-ml.so.1 (tests/fakes/nvml) loaded with dlopen as
// the driver's would be: discovery and device facts, energy from the driver's counter (or power integrated
// on an old driver), a lost GPU, a driver reload and NVML errors each costing one interval and nothing
// else, per-process use (SM time from utilization samples, memory, compute/graphics), MIG instances, and
// the GPU source inside an EnergyMeter beside other zones.
//
// Each test writes its scenario into a directory of its own: a new scenario path is a new machine to the
// fake (its counters start afresh), so tests do not depend on each other's order. Timing bounds are loose
// and each says why: the machine running these is shared and may stall any thread for tens of ms.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/text_io.hpp"
#include "energy/energy.hpp"
#include "energy/gpu/gpu_source.hpp"
#include "fakes/http_server.hpp"
#include "keplershm/keplershm.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

using nlohmann::json;
using testing::TempDir;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kNone = 0xffffffffu;

/// The fake's scenario file, FAKE_NVML_SCENARIO pointing at it; each write replaces it atomically (written
/// aside, then renamed), so that the fake sees the old or the new scenario, never half of one.
class Scenario {
public:
    explicit Scenario(const json& scenario) {
        write(scenario);
        setenv("FAKE_NVML_SCENARIO", path().c_str(), 1);
    }
    ~Scenario() { unsetenv("FAKE_NVML_SCENARIO"); }
    void write(const json& scenario) const { dir_.write("scenario.json", scenario.dump()); }
    [[nodiscard]] std::string path() const { return (dir_.path() / "scenario.json").string(); }

private:
    TempDir dir_;
};

json gpus(std::vector<json> devices) { return {{"devices", devices}}; }

NvmlSettings nvml_at(const std::string& library) {
    NvmlSettings settings;
    settings.library = library;
    return settings;
}

std::unique_ptr<GpuSource> load(const char* library = FAKE_NVML_LIBRARY) {
    std::string why;
    std::unique_ptr<GpuSource> source = make_nvml_source(nvml_at(library), why);
    EXPECT_NE(source, nullptr) << why;
    return source;
}

std::vector<keplershm_zone_sample> read(GpuSource& source) {
    std::vector<keplershm_zone_sample> samples(source.zones().size());
    source.read(samples, monotonic_now_ns());
    return samples;
}

bool valid(const keplershm_zone_sample& s) { return (s.flags & KEPLERSHM_ZONE_VALID) != 0; }

/// Watts over an interval: its energy over the time between the two reads that bound it.
double watts(const keplershm_zone_sample& now, const keplershm_zone_sample& before) {
    return static_cast<double>(now.energy_delta_uj) / static_cast<double>(now.read_time_ns - before.read_time_ns) * 1e3;
}

std::map<uint32_t, GpuProcessUse> by_pid(const std::vector<GpuProcessUse>& uses) {
    std::map<uint32_t, GpuProcessUse> out;
    for (const GpuProcessUse& u : uses) {
        EXPECT_FALSE(out.contains(u.pid)) << "pid " << u.pid << " listed twice";
        out[u.pid] = u;
    }
    return out;
}

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

/// A fake RAPL package zone under a sysfs root, so that GPU zones come after another source's.
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
