// fake_nvml_test.cpp — the fake libnvidia-ml.so.1 checked the way the collector uses it: dlopen by path,
// dlsym by NVML's symbol names, calls through function pointers declared here from nvml.h. Each test writes
// its scenario into its own directory (a new file is a new machine to the fake, so counters start afresh)
// and replaces it by rename, as tests of the collector will.
#include "nvml_abi.hpp"
#include "temp_dir.hpp"

#include <dlfcn.h>
#include <stdlib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Function-pointer types of the NVML entry points used, as nvml.h declares them.
using InitFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using StringFn = nvmlReturn_t (*)(char*, unsigned);
using CountFn = nvmlReturn_t (*)(unsigned*);
using HandleByIndexFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
using DeviceUintFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
using DeviceStringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
using PciInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using EnergyFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using MigModeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*);
using ProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
using UtilizationFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned*, unsigned long long);
using MigHandleFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlDevice_t*);
using ParentHandleFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t*);
using GpmSupportFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSupport_t*);
using GpmAllocFn = nvmlReturn_t (*)(nvmlGpmSample_t*);
using GpmFreeFn = nvmlReturn_t (*)(nvmlGpmSample_t);
using GpmMigSampleFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlGpmSample_t);
using GpmMetricsFn = nvmlReturn_t (*)(nvmlGpmMetricsGet_t*);

// One loaded copy of the library and the entry points the tests call.
class Nvml {
public:
    explicit Nvml(const char* path) : lib_(dlopen(path, RTLD_NOW | RTLD_LOCAL)) {}
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;
    // Balances any init a failed test left behind, so the next test starts uninitialized.
    ~Nvml() {
        for (int i = 0; shutdown != nullptr && i < 100 && shutdown() == NVML_SUCCESS; ++i) {}
        if (lib_ != nullptr) dlclose(lib_);
    }
    [[nodiscard]] void* lib() const { return lib_; }
    template <typename F>
    F get(const char* name) const { return lib_ == nullptr ? nullptr : reinterpret_cast<F>(dlsym(lib_, name)); }

private:
    void* lib_;

public:
    InitFn init = get<InitFn>("nvmlInit_v2");
    InitFn shutdown = get<InitFn>("nvmlShutdown");
    ErrorStringFn error_string = get<ErrorStringFn>("nvmlErrorString");
    StringFn driver_version = get<StringFn>("nvmlSystemGetDriverVersion");
    CountFn count = get<CountFn>("nvmlDeviceGetCount_v2");
    HandleByIndexFn handle = get<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
    DeviceUintFn index = get<DeviceUintFn>("nvmlDeviceGetIndex");
    DeviceStringFn uuid = get<DeviceStringFn>("nvmlDeviceGetUUID");
    DeviceStringFn name = get<DeviceStringFn>("nvmlDeviceGetName");
    PciInfoFn pci = get<PciInfoFn>("nvmlDeviceGetPciInfo_v3");
    DeviceUintFn power = get<DeviceUintFn>("nvmlDeviceGetPowerUsage");
    DeviceUintFn power_limit = get<DeviceUintFn>("nvmlDeviceGetEnforcedPowerLimit");
    EnergyFn energy = get<EnergyFn>("nvmlDeviceGetTotalEnergyConsumption");
    ProcessesFn compute = get<ProcessesFn>("nvmlDeviceGetComputeRunningProcesses_v3");
    ProcessesFn graphics = get<ProcessesFn>("nvmlDeviceGetGraphicsRunningProcesses_v3");
    UtilizationFn utilization = get<UtilizationFn>("nvmlDeviceGetProcessUtilization");
    MigModeFn mig_mode = get<MigModeFn>("nvmlDeviceGetMigMode");
    DeviceUintFn max_mig = get<DeviceUintFn>("nvmlDeviceGetMaxMigDeviceCount");
    MigHandleFn mig_handle = get<MigHandleFn>("nvmlDeviceGetMigDeviceHandleByIndex");
    DeviceUintFn is_mig = get<DeviceUintFn>("nvmlDeviceIsMigDeviceHandle");
    DeviceUintFn gpu_instance = get<DeviceUintFn>("nvmlDeviceGetGpuInstanceId");
    DeviceUintFn compute_instance = get<DeviceUintFn>("nvmlDeviceGetComputeInstanceId");
    ParentHandleFn parent = get<ParentHandleFn>("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
    GpmSupportFn gpm_support = get<GpmSupportFn>("nvmlGpmQueryDeviceSupport");
    GpmAllocFn gpm_alloc = get<GpmAllocFn>("nvmlGpmSampleAlloc");
    GpmFreeFn gpm_free = get<GpmFreeFn>("nvmlGpmSampleFree");
    GpmMigSampleFn gpm_mig_sample = get<GpmMigSampleFn>("nvmlGpmMigSampleGet");
    GpmMetricsFn gpm_metrics = get<GpmMetricsFn>("nvmlGpmMetricsGet");
};

// A scenario file in a directory of its own, replaced atomically (write beside, then rename).
class ScenarioFile {
public:
    explicit ScenarioFile(const json& scenario) { write(scenario); }
    void write(const json& scenario) { write_text(scenario.dump()); }
    void write_text(const std::string& text) {
        const auto tmp = dir_.path() / "scenario.json.tmp";
        std::ofstream(tmp) << text;
        std::filesystem::rename(tmp, path());
        setenv("FAKE_NVML_SCENARIO", path().c_str(), 1);
    }
    [[nodiscard]] std::filesystem::path path() const { return dir_.path() / "scenario.json"; }

private:
    kepler::testing::TempDir dir_{"fake-nvml-test"};
};

json one_gpu(json device) { return {{"devices", json::array({std::move(device)})}}; }

std::string uuid_of(const Nvml& nvml, nvmlDevice_t device) {
    char text[96] = {};
    return nvml.uuid(device, text, sizeof text) == NVML_SUCCESS ? text : "<error>";
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

unsigned long long energy_of(const Nvml& nvml, nvmlDevice_t device) {
    unsigned long long mj = 0;
    EXPECT_EQ(nvml.energy(device, &mj), NVML_SUCCESS);
    return mj;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

class FakeNvml : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_NE(nvml.lib(), nullptr) << dlerror();
        unsetenv("FAKE_NVML_SCENARIO");
    }
    // Init on `scenario` and the handle of its first GPU.
    nvmlDevice_t start(const json& scenario) {
        file = std::make_unique<ScenarioFile>(scenario);
        EXPECT_EQ(nvml.init(), NVML_SUCCESS);
        nvmlDevice_t device = nullptr;
        EXPECT_EQ(nvml.handle(0, &device), NVML_SUCCESS);
        return device;
    }
    Nvml nvml{FAKE_NVML_LIBRARY};
    std::unique_ptr<ScenarioFile> file;
};

TEST_F(FakeNvml, InitNeedsAReadableScenarioAndCountsReferences) {
    unsigned count = 0;
    EXPECT_EQ(nvml.count(&count), NVML_ERROR_UNINITIALIZED);
    EXPECT_EQ(nvml.init(), NVML_ERROR_DRIVER_NOT_LOADED);  // FAKE_NVML_SCENARIO unset: no driver
    setenv("FAKE_NVML_SCENARIO", "/nonexistent/scenario.json", 1);
    EXPECT_EQ(nvml.init(), NVML_ERROR_DRIVER_NOT_LOADED);
    ScenarioFile bad(json::object());
    bad.write_text("{not json");
    EXPECT_EQ(nvml.init(), NVML_ERROR_DRIVER_NOT_LOADED);
    bad.write({{"init_error", NVML_ERROR_NO_PERMISSION}, {"devices", json::array()}});
    EXPECT_EQ(nvml.init(), NVML_ERROR_NO_PERMISSION);

    ScenarioFile good(one_gpu({{"power_w", 100}}));
    EXPECT_EQ(nvml.init(), NVML_SUCCESS);
    EXPECT_EQ(nvml.init(), NVML_SUCCESS);
    EXPECT_EQ(nvml.shutdown(), NVML_SUCCESS);
    EXPECT_EQ(nvml.count(&count), NVML_SUCCESS);  // one init still outstanding
    EXPECT_EQ(count, 1u);
    EXPECT_EQ(nvml.shutdown(), NVML_SUCCESS);
    EXPECT_EQ(nvml.count(&count), NVML_ERROR_UNINITIALIZED);
    EXPECT_EQ(nvml.shutdown(), NVML_ERROR_UNINITIALIZED);
    EXPECT_STREQ(nvml.error_string(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
    EXPECT_STREQ(nvml.error_string(NVML_ERROR_NOT_SUPPORTED), "Not Supported");
    EXPECT_STREQ(nvml.error_string(NVML_ERROR_UNINITIALIZED), "Uninitialized");
}

TEST_F(FakeNvml, ReportsIdentityWithNvmlBufferRules) {
    start({{"driver_version", "535.1"},
           {"devices", {{{"uuid", "GPU-a"}, {"name", "NVIDIA H100 80GB HBM3"}, {"pci_bus_id", "00000000:17:00.0"}},
                        {{"uuid", "GPU-b"}, {"pci_bus_id", "00000001:A3:1F.0"}}}}});
    unsigned count = 0;
    ASSERT_EQ(nvml.count(&count), NVML_SUCCESS);
    ASSERT_EQ(count, 2u);
    nvmlDevice_t first = nullptr, second = nullptr;
    ASSERT_EQ(nvml.handle(0, &first), NVML_SUCCESS);
    ASSERT_EQ(nvml.handle(1, &second), NVML_SUCCESS);
    EXPECT_EQ(nvml.handle(2, &second), NVML_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(nvml.handle(0, nullptr), NVML_ERROR_INVALID_ARGUMENT);
    unsigned index = 9;
    EXPECT_EQ(nvml.index(second, &index), NVML_SUCCESS);
    EXPECT_EQ(index, 1u);
    EXPECT_EQ(uuid_of(nvml, first), "GPU-a");
    EXPECT_EQ(uuid_of(nvml, second), "GPU-b");

    char text[96] = {};
    EXPECT_EQ(nvml.name(first, text, sizeof text), NVML_SUCCESS);
    EXPECT_STREQ(text, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(nvml.name(first, text, 5), NVML_ERROR_INSUFFICIENT_SIZE);
    EXPECT_EQ(nvml.name(first, nullptr, 96), NVML_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(nvml.uuid(reinterpret_cast<nvmlDevice_t>(text), text, sizeof text), NVML_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(nvml.driver_version(text, sizeof text), NVML_SUCCESS);
    EXPECT_STREQ(text, "535.1");
    EXPECT_EQ(nvml.driver_version(text, 3), NVML_ERROR_INSUFFICIENT_SIZE);

    nvmlPciInfo_t pci{};
    ASSERT_EQ(nvml.pci(second, &pci), NVML_SUCCESS);
    EXPECT_STREQ(pci.busId, "00000001:A3:1F.0");
    EXPECT_STREQ(pci.busIdLegacy, "0001:A3:1F.0");
    EXPECT_EQ(pci.domain, 1u);
    EXPECT_EQ(pci.bus, 0xA3u);
    EXPECT_EQ(pci.device, 0x1Fu);
    EXPECT_EQ(pci.pciDeviceId & 0xFFFFu, 0x10DEu);  // NVIDIA's vendor id in the low half
}

TEST_F(FakeNvml, EnergyCounterIntegratesPowerPiecewise) {
    nvmlDevice_t gpu = start(one_gpu({{"power_w", 100.0}, {"power_limit_w", 350}}));
    unsigned mw = 0;
    EXPECT_EQ(nvml.power(gpu, &mw), NVML_SUCCESS);
    EXPECT_EQ(mw, 100'000u);
    EXPECT_EQ(nvml.power_limit(gpu, &mw), NVML_SUCCESS);
    EXPECT_EQ(mw, 350'000u);

    auto t0 = Clock::now();
    const unsigned long long e0 = energy_of(nvml, gpu);
    sleep_ms(200);
    const unsigned long long e1 = energy_of(nvml, gpu);
    const double low_w = static_cast<double>(e1 - e0) / seconds_since(t0) / 1000.0;
    EXPECT_NEAR(low_w, 100.0, 25.0);

    file->write(one_gpu({{"power_w", 400.0}}));
    const unsigned long long e2 = energy_of(nvml, gpu);  // this call reads the new file: 400 W from here
    auto t2 = Clock::now();
    EXPECT_GE(e2, e1);
    sleep_ms(200);
    const unsigned long long e3 = energy_of(nvml, gpu);
    const double high_w = static_cast<double>(e3 - e2) / seconds_since(t2) / 1000.0;
    EXPECT_NEAR(high_w, 400.0, 100.0);
    EXPECT_EQ(nvml.power(gpu, &mw), NVML_SUCCESS);
    EXPECT_EQ(mw, 400'000u);
}

TEST_F(FakeNvml, DriverGenerationRestartsTheCounterAndOffsetIsAdded) {
    nvmlDevice_t gpu = start(one_gpu({{"power_w", 300.0}, {"energy_offset_mj", 5'000'000'000ULL}}));
    sleep_ms(100);
    const unsigned long long before = energy_of(nvml, gpu);
    EXPECT_GE(before, 5'000'000'000ULL + 20'000);  // 300 W for ≥100 ms is ≥30 J
    file->write(one_gpu({{"power_w", 300.0}, {"driver_generation", 1}}));
    const unsigned long long after = energy_of(nvml, gpu);
    EXPECT_LT(after, 10'000u);  // restarted at 0 a moment ago (a 30 ms stall would still pass)
    sleep_ms(50);
    EXPECT_GT(energy_of(nvml, gpu), after);

    file->write(one_gpu({{"power_w", 300.0}, {"driver_generation", 1}, {"energy", "unsupported"}}));
    unsigned long long mj = 0;
    EXPECT_EQ(nvml.energy(gpu, &mj), NVML_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(nvml.energy(gpu, nullptr), NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(FakeNvml, LostGpuRecoversAndRemovedGpuActsLost) {
    nvmlDevice_t gpu = start({{"devices", {{{"power_w", 200.0}}, {{"uuid", "GPU-second"}}}}});
    const unsigned long long before = energy_of(nvml, gpu);
    file->write({{"devices", {{{"power_w", 200.0}, {"lost", true}}, {{"uuid", "GPU-second"}}}}});
    unsigned mw = 0;
    nvmlDevice_t again = nullptr;
    EXPECT_EQ(nvml.power(gpu, &mw), NVML_ERROR_GPU_IS_LOST);
    EXPECT_EQ(nvml.handle(0, &again), NVML_ERROR_GPU_IS_LOST);
    char text[96];
    EXPECT_EQ(nvml.uuid(gpu, text, sizeof text), NVML_ERROR_GPU_IS_LOST);
    sleep_ms(20);

    file->write({{"devices", {{{"power_w", 200.0}}, {{"uuid", "GPU-second"}}}}});
    EXPECT_EQ(nvml.power(gpu, &mw), NVML_SUCCESS);
    EXPECT_GT(energy_of(nvml, gpu), before);  // kept integrating while lost
    ASSERT_EQ(nvml.handle(0, &again), NVML_SUCCESS);
    EXPECT_EQ(again, gpu);  // handles are stable

    nvmlDevice_t second = nullptr;
    ASSERT_EQ(nvml.handle(1, &second), NVML_SUCCESS);
    file->write(one_gpu({{"power_w", 200.0}}));
    EXPECT_EQ(nvml.uuid(second, text, sizeof text), NVML_ERROR_GPU_IS_LOST);
    unsigned count = 0;
    EXPECT_EQ(nvml.count(&count), NVML_SUCCESS);
    EXPECT_EQ(count, 1u);
}

TEST_F(FakeNvml, ErrorsOverrideOneFunctionAndMalformedRereadIsIgnored) {
    nvmlDevice_t gpu = start(one_gpu({{"uuid", "GPU-x"}, {"power_w", 50}, {"errors", {{"nvmlDeviceGetPowerUsage", 999}}}}));
    unsigned mw = 0;
    EXPECT_EQ(nvml.power(gpu, &mw), NVML_ERROR_UNKNOWN);
    EXPECT_STREQ(nvml.error_string(NVML_ERROR_UNKNOWN), "Unknown Error");
    EXPECT_EQ(uuid_of(nvml, gpu), "GPU-x");

    file->write(one_gpu({{"uuid", "GPU-x"}, {"power_w", 50}}));
    EXPECT_EQ(nvml.power(gpu, &mw), NVML_SUCCESS);
    file->write_text("{\"devices\": [");  // a half-written file: the fake keeps the last good scenario
    EXPECT_EQ(nvml.power(gpu, &mw), NVML_SUCCESS);
    EXPECT_EQ(mw, 50'000u);
}

TEST_F(FakeNvml, RunningProcessesFollowTheTwoCallProtocol) {
    nvmlDevice_t gpu = start({{"devices",
                               {{{"processes",
                                  {{{"pid", 10}, {"type", "compute"}, {"used_memory_bytes", 1 << 20}},
                                   {{"pid", 11}, {"type", "graphics"}},
                                   {{"pid", 12}, {"type", "both"}, {"used_memory_bytes", 7}}}}},
                                json::object()}}});
    unsigned count = 0;
    ASSERT_EQ(nvml.compute(gpu, &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
    ASSERT_EQ(count, 2u);
    std::vector<nvmlProcessInfo_t> infos(count);
    count = 1;
    EXPECT_EQ(nvml.compute(gpu, &count, infos.data()), NVML_ERROR_INSUFFICIENT_SIZE);
    EXPECT_EQ(count, 2u);
    ASSERT_EQ(nvml.compute(gpu, &count, infos.data()), NVML_SUCCESS);
    EXPECT_EQ(infos[0].pid, 10u);
    EXPECT_EQ(infos[0].usedGpuMemory, 1u << 20);
    EXPECT_EQ(infos[0].gpuInstanceId, 0xFFFFFFFFu);
    EXPECT_EQ(infos[0].computeInstanceId, 0xFFFFFFFFu);
    EXPECT_EQ(infos[1].pid, 12u);
    EXPECT_EQ(infos[1].usedGpuMemory, 7u);

    count = 0;
    ASSERT_EQ(nvml.graphics(gpu, &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
    ASSERT_EQ(count, 2u);
    ASSERT_EQ(nvml.graphics(gpu, &count, infos.data()), NVML_SUCCESS);
    EXPECT_EQ(infos[0].pid, 11u);
    EXPECT_EQ(infos[1].pid, 12u);
    EXPECT_EQ(nvml.graphics(gpu, nullptr, infos.data()), NVML_ERROR_INVALID_ARGUMENT);

    nvmlDevice_t idle = nullptr;
    ASSERT_EQ(nvml.handle(1, &idle), NVML_SUCCESS);
    count = 0;
    EXPECT_EQ(nvml.compute(idle, &count, nullptr), NVML_SUCCESS);  // none running: SUCCESS with 0
    EXPECT_EQ(count, 0u);
}

long long now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

TEST_F(FakeNvml, UtilizationSamplesSinceLastSeen) {
    const long long start_us = now_us();
    nvmlDevice_t gpu = start(one_gpu({{"processes",
                                        {{{"pid", 1234}, {"sm_util", 40}, {"mem_util", 10}},
                                         {{"pid", 77}, {"type", "graphics"}}}}}));  // idle: no samples
    sleep_ms(350);  // samples at 0, 100, 200, 300 ms after first sight
    unsigned count = 0;
    ASSERT_EQ(nvml.utilization(gpu, nullptr, &count, 0), NVML_ERROR_INSUFFICIENT_SIZE);
    ASSERT_GE(count, 3u);
    ASSERT_LE(count, (now_us() - start_us) / 100'000 + 1);  // one a period, however long the sleep took
    std::vector<nvmlProcessUtilizationSample_t> samples(count + 2);  // room for a sample taken meanwhile
    count = static_cast<unsigned>(samples.size());
    ASSERT_EQ(nvml.utilization(gpu, samples.data(), &count, 0), NVML_SUCCESS);
    samples.resize(count);
    for (std::size_t i = 0; i < samples.size(); ++i) {
        EXPECT_EQ(samples[i].pid, 1234u);
        EXPECT_EQ(samples[i].smUtil, 40u);
        EXPECT_EQ(samples[i].memUtil, 10u);
        EXPECT_GE(samples[i].timeStamp, static_cast<unsigned long long>(start_us));
        EXPECT_LE(samples[i].timeStamp, static_cast<unsigned long long>(now_us()));
        if (i > 0) {
            EXPECT_GT(samples[i].timeStamp, samples[i - 1].timeStamp);  // oldest first
        }
    }

    const unsigned long long last_seen = samples[1].timeStamp;
    std::vector<nvmlProcessUtilizationSample_t> newer(samples.size() + 2);
    count = 1;
    EXPECT_EQ(nvml.utilization(gpu, newer.data(), &count, last_seen), NVML_ERROR_INSUFFICIENT_SIZE);
    EXPECT_GE(count, samples.size() - 2);
    count = static_cast<unsigned>(newer.size());
    ASSERT_EQ(nvml.utilization(gpu, newer.data(), &count, last_seen), NVML_SUCCESS);
    EXPECT_GE(count, samples.size() - 2);
    for (unsigned i = 0; i < count; ++i) EXPECT_GT(newer[i].timeStamp, last_seen);

    const auto future = static_cast<unsigned long long>(now_us() + 60'000'000);
    EXPECT_EQ(nvml.utilization(gpu, newer.data(), &count, future), NVML_ERROR_NOT_FOUND);
}

json mig_gpu() {
    return one_gpu({{"mig_mode", 1},
                    {"processes", {{{"pid", 1}}}},  // ignored in MIG mode: processes belong to MIG devices
                    {"mig_devices",
                     {{{"uuid", "MIG-a"}, {"gpu_instance_id", 1}, {"compute_instance_id", 0},
                       {"processes", {{{"pid", 99}, {"used_memory_bytes", 1024}}}}},
                      {{"uuid", "MIG-b"}, {"gpu_instance_id", 2}, {"compute_instance_id", 3},
                       {"processes", {{{"pid", 100}}}}}}}});
}

TEST_F(FakeNvml, MigDevicesHaveHandlesIdsAndProcesses) {
    nvmlDevice_t gpu = start(mig_gpu());
    unsigned current = 9, pending = 9, max = 0, flag = 9, id = 9;
    ASSERT_EQ(nvml.mig_mode(gpu, &current, &pending), NVML_SUCCESS);
    EXPECT_EQ(current, 1u);
    EXPECT_EQ(pending, 1u);
    ASSERT_EQ(nvml.max_mig(gpu, &max), NVML_SUCCESS);
    EXPECT_EQ(max, 7u);
    nvmlDevice_t a = nullptr, b = nullptr, parent = nullptr;
    ASSERT_EQ(nvml.mig_handle(gpu, 0, &a), NVML_SUCCESS);
    ASSERT_EQ(nvml.mig_handle(gpu, 1, &b), NVML_SUCCESS);
    EXPECT_EQ(nvml.mig_handle(gpu, 2, &parent), NVML_ERROR_NOT_FOUND);
    EXPECT_EQ(uuid_of(nvml, b), "MIG-b");
    EXPECT_EQ(nvml.is_mig(b, &flag), NVML_SUCCESS);
    EXPECT_EQ(flag, 1u);
    EXPECT_EQ(nvml.is_mig(gpu, &flag), NVML_SUCCESS);
    EXPECT_EQ(flag, 0u);
    EXPECT_EQ(nvml.gpu_instance(b, &id), NVML_SUCCESS);
    EXPECT_EQ(id, 2u);
    EXPECT_EQ(nvml.compute_instance(b, &id), NVML_SUCCESS);
    EXPECT_EQ(id, 3u);
    EXPECT_EQ(nvml.gpu_instance(gpu, &id), NVML_ERROR_INVALID_ARGUMENT);
    ASSERT_EQ(nvml.parent(a, &parent), NVML_SUCCESS);
    EXPECT_EQ(parent, gpu);

    nvmlProcessInfo_t infos[4] = {};
    unsigned count = 4;
    ASSERT_EQ(nvml.compute(a, &count, infos), NVML_SUCCESS);
    ASSERT_EQ(count, 1u);
    EXPECT_EQ(infos[0].pid, 99u);
    EXPECT_EQ(infos[0].gpuInstanceId, 1u);
    EXPECT_EQ(infos[0].computeInstanceId, 0u);
    count = 4;
    ASSERT_EQ(nvml.compute(gpu, &count, infos), NVML_SUCCESS);  // the full GPU: every MIG device's
    ASSERT_EQ(count, 2u);
    EXPECT_EQ(infos[1].pid, 100u);
    EXPECT_EQ(infos[1].gpuInstanceId, 2u);
    EXPECT_EQ(infos[1].computeInstanceId, 3u);
    EXPECT_EQ(nvml.utilization(gpu, nullptr, &count, 0), NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(FakeNvml, GpmGivesAGpuInstancesGraphicsActivityBetweenTwoSamples) {
    json scenario = mig_gpu();
    scenario["devices"][0]["gpm"] = true;
    scenario["devices"][0]["mig_devices"][1]["gr_active_percent"] = 40.0;
    nvmlDevice_t gpu = start(scenario);
    nvmlGpmSupport_t support{NVML_GPM_SUPPORT_VERSION, 0};
    ASSERT_EQ(nvml.gpm_support(gpu, &support), NVML_SUCCESS);
    EXPECT_EQ(support.isSupportedDevice, 1u);
    support.version = 7;
    EXPECT_EQ(nvml.gpm_support(gpu, &support), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

    nvmlGpmSample_t first = nullptr, second = nullptr;
    ASSERT_EQ(nvml.gpm_alloc(&first), NVML_SUCCESS);
    ASSERT_EQ(nvml.gpm_alloc(&second), NVML_SUCCESS);
    auto request = std::make_unique<nvmlGpmMetricsGet_t>();
    request->version = NVML_GPM_METRICS_GET_VERSION;
    request->numMetrics = 2;
    request->sample1 = first;
    request->sample2 = second;
    request->metrics[0].metricId = NVML_GPM_METRIC_GRAPHICS_UTIL;
    request->metrics[1].metricId = 2;  // SM_UTIL: not implemented by the fake
    EXPECT_EQ(nvml.gpm_metrics(request.get()), NVML_ERROR_INVALID_ARGUMENT) << "samples not taken yet";
    ASSERT_EQ(nvml.gpm_mig_sample(gpu, 2, first), NVML_SUCCESS);
    sleep_ms(150);
    ASSERT_EQ(nvml.gpm_mig_sample(gpu, 2, second), NVML_SUCCESS);
    ASSERT_EQ(nvml.gpm_metrics(request.get()), NVML_SUCCESS);
    EXPECT_EQ(request->metrics[0].nvmlReturn, NVML_SUCCESS);
    EXPECT_NEAR(request->metrics[0].value, 40.0, 1e-6) << "a steady 40 % between any two samples";
    EXPECT_EQ(request->metrics[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(nvml.gpm_mig_sample(gpu, 9, first), NVML_ERROR_NOT_FOUND) << "no GPU instance 9";
    ASSERT_EQ(nvml.gpm_mig_sample(gpu, 1, first), NVML_SUCCESS);
    EXPECT_EQ(nvml.gpm_metrics(request.get()), NVML_ERROR_INVALID_ARGUMENT) << "samples of two GPU instances";
    request->version = 2;
    EXPECT_EQ(nvml.gpm_metrics(request.get()), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    EXPECT_EQ(nvml.gpm_free(first), NVML_SUCCESS);
    EXPECT_EQ(nvml.gpm_free(first), NVML_ERROR_INVALID_ARGUMENT) << "freed twice";
    EXPECT_EQ(nvml.gpm_free(second), NVML_SUCCESS);

    scenario["devices"][0]["gpm"] = false;
    file->write(scenario);
    ASSERT_EQ(nvml.gpm_support(gpu, &support), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    support.version = NVML_GPM_SUPPORT_VERSION;
    ASSERT_EQ(nvml.gpm_support(gpu, &support), NVML_SUCCESS);
    EXPECT_EQ(support.isSupportedDevice, 0u) << "a GPU before Hopper";
}

TEST(FakeNvmlOldDriver, LacksEnergyAndMigButReportsPower) {
    Nvml old(FAKE_NVML_OLD_LIBRARY);
    ASSERT_NE(old.lib(), nullptr) << dlerror();
    EXPECT_EQ(old.energy, nullptr);
    EXPECT_EQ(old.mig_mode, nullptr);
    EXPECT_EQ(old.mig_handle, nullptr);
    EXPECT_EQ(old.is_mig, nullptr);
    EXPECT_EQ(old.gpm_mig_sample, nullptr);
    ASSERT_NE(old.power, nullptr);
    ScenarioFile file(one_gpu({{"power_w", 75.5}}));
    ASSERT_EQ(old.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    ASSERT_EQ(old.handle(0, &gpu), NVML_SUCCESS);
    unsigned mw = 0;
    EXPECT_EQ(old.power(gpu, &mw), NVML_SUCCESS);
    EXPECT_EQ(mw, 75'500u);
}

}  // namespace
