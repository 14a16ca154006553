// End to end with GPUs: the real kepler-collect binary loads the fake libnvidia-ml.so.1
// (tests/fakes/nvml, --nvml-library) steered by a scenario file (FAKE_NVML_SCENARIO, inherited by the
// collector), and a libkeplershm Reader checks what it publishes: GPU zones in the header, the devices in
// every frame, the GPU energy, and the test's own child named as a GPU user and resolved to its process
// record; beside an AMD card read through the kernel, the three GPUs keep distinct zones. --gpu off
// publishes none of it. Runs serially: the child burns CPU so that the procfs source
// publishes it every interval, and the energy check compares with wall time.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "keplershm/keplershm.hpp"
#include "app/collector_process.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::BusyChild;
using testing::Collector;
using testing::TempDir;

constexpr uint32_t kNone = 0xffffffffu;
constexpr uint64_t kGiB = 1ull << 30;

keplershm::Reader open_when_ready(const std::string& name, const Collector& collector) {
    for (int i = 0; i < 1500; ++i) {
        try {
            return keplershm::Reader::open(name);
        } catch (const keplershm::Error& e) {
            if (e.code() == KEPLERSHM_E_PERMISSION) throw std::runtime_error(std::string(e.what()) + "\n" + collector.log());
            testing::sleep_ms(10);
        }
    }
    throw std::runtime_error("the collector never created its segment; its log:\n" + collector.log());
}

/// The fake NVML's scenario in a directory of its own (a new machine to the fake), named in this process's
/// environment for the collector to inherit; unset again at the end of the test.
class Scenario {
public:
    explicit Scenario(const json& scenario) {
        dir_.write("scenario.json", scenario.dump());
        setenv("FAKE_NVML_SCENARIO", (dir_.path() / "scenario.json").c_str(), 1);
    }
    Scenario(const Scenario&) = delete;
    Scenario& operator=(const Scenario&) = delete;
    ~Scenario() { unsetenv("FAKE_NVML_SCENARIO"); }
    /// A new scenario for the running collector's fake to read.
    void write(const json& scenario) const { dir_.write("scenario.json", scenario.dump()); }

private:
    TempDir dir_;
};

/// GPU 0 at 250 W runs our child (compute, SM 50 %, 1 GiB); GPU 1 at 50 W runs nobody.
json scenario_for(pid_t child) {
    return {{"devices",
             {{{"uuid", "GPU-e2e00000-0000-0000-0000-000000000000"},
               {"name", "NVIDIA H100 80GB HBM3"},
               {"power_w", 250},
               {"processes", {{{"pid", child}, {"type", "compute"}, {"sm_util", 50}, {"used_memory_bytes", kGiB}}}}},
              {{"uuid", "GPU-e2e00000-0000-0000-0000-000000000001"}, {"power_w", 50}}}}};
}

std::vector<std::string> collector_args(const std::string& name, const TempDir& sysfs, const std::string& gpu) {
    // procfs: the same source on every machine (BPF needs privileges and BTF), and it publishes every
    // process that ran in the interval, as our busy child does.
    return {"--shm-name", name, "--interval", "300ms", "--source", "procfs", "--sysfs-root", sysfs.path().string(),
            "--kube", "off", "--gpu", gpu, "--nvml-library", FAKE_NVML_LIBRARY};
}

TEST(GpuEndToEnd, NvmlGpusAreZonesDevicesAndOurChildIsAResolvedUser) {
    TempDir empty_sysfs;  // no RAPL, no hwmon, no DRM card: the GPUs are the only meters
    BusyChild child(testing::test_cpu(), 0.3);
    const uint64_t start_ticks = testing::proc_times(child.pid()).start_ticks;
    Scenario scenario(scenario_for(child.pid()));
    const std::string name = testing::unique_segment_name("kc-gpu-e2e");
    Collector collector(collector_args(name, empty_sysfs, "auto"));
    keplershm::Reader reader = open_when_ready(name, collector);

    const keplershm_segment_info info = reader.info();
    ASSERT_EQ(info.zone_count, 2u) << collector.log();
    for (uint32_t i = 0; i < 2; ++i) {
        EXPECT_EQ(keplershm::get_text(info.header->zones[i].name), "gpu-" + std::to_string(i));
        EXPECT_EQ(info.header->zones[i].kind, static_cast<uint32_t>(KEPLERSHM_ZONE_GPU));
        EXPECT_EQ(info.header->zones[i].power_source, static_cast<uint32_t>(KEPLERSHM_POWER_NVML));
    }
    EXPECT_EQ(info.header->gpu_device_capacity, 2u);
    EXPECT_GT(info.header->gpu_usage_capacity, 0u);
    EXPECT_TRUE(info.metric_mask & KEPLERSHM_METRIC_ENERGY);

    int resolved_busy_frames = 0;
    int energy_checks = 0;
    uint64_t previous_sequence = 0;
    keplershm_zone_sample previous_gpu0{};
    for (int i = 0; i < 30 && (resolved_busy_frames < 3 || energy_checks < 3); ++i) {
        keplershm::FrameView f;
        ASSERT_EQ(reader.next(5s, f), keplershm::Status::ok) << collector.log();
        ASSERT_EQ(f.gpu_devices().size(), 2u);
        EXPECT_EQ(keplershm::get_text(f.gpu_devices()[0].uuid), "GPU-e2e00000-0000-0000-0000-000000000000");
        EXPECT_EQ(keplershm::get_text(f.gpu_devices()[1].uuid), "GPU-e2e00000-0000-0000-0000-000000000001");
        EXPECT_EQ(f.gpu_devices()[0].zone_index, 0u);
        EXPECT_EQ(f.gpu_devices()[1].zone_index, 1u);
        EXPECT_EQ(f.gpu_devices()[0].vendor, static_cast<uint32_t>(KEPLERSHM_GPU_NVIDIA));
        EXPECT_TRUE(f.gpu_devices()[0].flags & KEPLERSHM_GPU_USAGE_VALID);
        EXPECT_EQ(f.gpu_devices()[0].memory_used_bytes, kGiB);
        ASSERT_EQ(f.zones().size(), 2u);

        // GPU 0's energy over consecutive frames: the fake's counter is 250 W × time, and the source stamps
        // read_time_ns right after reading it, so only a stall between the two (≥ 30 ms of a 300 ms
        // interval) could move the ratio past 10 %.
        const keplershm_zone_sample gpu0 = f.zones()[0];
        if (previous_sequence != 0 && f.sequence() == previous_sequence + 1 && (gpu0.flags & KEPLERSHM_ZONE_VALID)) {
            const double seconds = static_cast<double>(gpu0.read_time_ns - previous_gpu0.read_time_ns) / 1e9;
            EXPECT_NEAR(static_cast<double>(gpu0.energy_delta_uj) / 1e6 / seconds, 250.0, 25.0);
            EXPECT_EQ(gpu0.energy_total_uj, previous_gpu0.energy_total_uj + gpu0.energy_delta_uj);
            ++energy_checks;
        }
        previous_sequence = f.sequence();
        previous_gpu0 = gpu0;

        for (const keplershm_gpu_usage& u : f.gpu_usage()) {
            if (u.pid != static_cast<uint32_t>(child.pid())) {
                ADD_FAILURE() << "only our child uses a GPU in this scenario, not pid " << u.pid;
                continue;
            }
            EXPECT_EQ(u.device, 0u);
            EXPECT_TRUE(u.flags & KEPLERSHM_GPU_USE_COMPUTE);
            EXPECT_EQ(u.memory_bytes, kGiB);
            if (u.process_index == kNone) continue;  // not published this frame (the child did not run)
            ASSERT_LT(u.process_index, f.processes().size());
            EXPECT_EQ(f.processes()[u.process_index].pid, u.pid) << "process_index names our child's record";
            EXPECT_EQ(f.processes()[u.process_index].start_time_ticks, start_ticks);
            EXPECT_EQ(u.start_time_ticks, start_ticks);
            if (!(u.flags & KEPLERSHM_GPU_USE_BUSY_VALID)) continue;  // the collector's first reading
            // SM 50 %: half of the sampled spans, which track the frame interval to within a 100 ms
            // sampling period, so never more than the interval itself (≥ 300 ms here).
            EXPECT_GT(u.busy_ns, 0u);
            EXPECT_LE(u.busy_ns, f.interval_end_ns() - f.interval_start_ns() + 100'000'000u);
            if (u.busy_ns > 0) ++resolved_busy_frames;
        }
    }
    EXPECT_GE(resolved_busy_frames, 3) << "our child as a resolved GPU user with busy time; the log:\n" << collector.log();
    EXPECT_GE(energy_checks, 3) << collector.log();
    EXPECT_EQ(collector.stop(), 0) << collector.log();
}

// A node with GPUs of two vendors: the fake NVML's two NVIDIA GPUs and an AMD card in a fake sysfs (amdgpu,
// 60 W on its hwmon meter). One collector publishes all three: NVIDIA's as gpu-0 and gpu-1, the AMD card
// (DRM's card0, also "gpu-0" to its own source) as gpu-2, each device record naming its own zone and vendor.
TEST(GpuEndToEnd, NvidiaAndAmdGpusTogetherAreThreeZonesWithDistinctNames) {
    TempDir sysfs;
    sysfs.write("class/drm/card0/device/uevent", "DRIVER=amdgpu\nPCI_CLASS=30000\nPCI_ID=1002:744C\nPCI_SLOT_NAME=0000:c3:00.0\n");
    sysfs.write("class/drm/card0/device/product_name", "AMD Instinct MI210\n");
    sysfs.write("class/drm/card0/device/hwmon/hwmon3/name", "amdgpu\n");
    sysfs.write("class/drm/card0/device/hwmon/hwmon3/power1_average", "60000000\n");
    BusyChild child(testing::test_cpu(), 0.3);
    Scenario scenario(scenario_for(child.pid()));
    const std::string name = testing::unique_segment_name("kc-gpu-mixed");
    Collector collector(collector_args(name, sysfs, "auto"));
    keplershm::Reader reader = open_when_ready(name, collector);

    const keplershm_segment_info info = reader.info();
    ASSERT_EQ(info.zone_count, 3u) << collector.log();
    const std::vector<std::pair<std::string, uint32_t>> expected = {
        {"gpu-0", KEPLERSHM_POWER_NVML}, {"gpu-1", KEPLERSHM_POWER_NVML}, {"gpu-2", KEPLERSHM_POWER_HWMON}};
    for (uint32_t i = 0; i < 3; ++i) {
        EXPECT_EQ(keplershm::get_text(info.header->zones[i].name), expected[i].first);
        EXPECT_EQ(info.header->zones[i].kind, static_cast<uint32_t>(KEPLERSHM_ZONE_GPU));
        EXPECT_EQ(info.header->zones[i].power_source, expected[i].second) << i;
    }
    EXPECT_NE(collector.log().find("is named gpu-2 in the segment"), std::string::npos) << collector.log();

    int amd_checks = 0;
    keplershm_zone_sample previous_amd{};
    uint64_t previous_sequence = 0;
    for (int i = 0; i < 20 && amd_checks < 3; ++i) {
        keplershm::FrameView f;
        ASSERT_EQ(reader.next(5s, f), keplershm::Status::ok) << collector.log();
        ASSERT_EQ(f.gpu_devices().size(), 3u);
        EXPECT_EQ(f.gpu_devices()[0].vendor, static_cast<uint32_t>(KEPLERSHM_GPU_NVIDIA));
        EXPECT_EQ(f.gpu_devices()[1].vendor, static_cast<uint32_t>(KEPLERSHM_GPU_NVIDIA));
        const keplershm_gpu_device& amd = f.gpu_devices()[2];
        EXPECT_EQ(amd.vendor, static_cast<uint32_t>(KEPLERSHM_GPU_AMD));
        EXPECT_EQ(amd.device_index, 0u) << "its DRM card number";
        EXPECT_EQ(amd.zone_index, 2u) << "the AMD card's own zone, not NVIDIA GPU 0's";
        EXPECT_EQ(keplershm::get_text(amd.pci_bus_id), "0000:c3:00.0");
        for (uint32_t d = 0; d < 2; ++d) EXPECT_EQ(f.gpu_devices()[d].zone_index, d);
        for (const keplershm_gpu_usage& u : f.gpu_usage()) EXPECT_EQ(u.device, 0u) << "only NVIDIA GPU 0 has a user";
        // The card's 60 W, integrated between the collector's reads of power1_average.
        const keplershm_zone_sample now = f.zones()[2];
        if (previous_sequence != 0 && f.sequence() == previous_sequence + 1 && (now.flags & KEPLERSHM_ZONE_VALID)) {
            const double seconds = static_cast<double>(now.read_time_ns - previous_amd.read_time_ns) / 1e9;
            EXPECT_NEAR(static_cast<double>(now.energy_delta_uj) / 1e6 / seconds, 60.0, 0.6);
            ++amd_checks;
        }
        previous_sequence = f.sequence();
        previous_amd = now;
    }
    EXPECT_GE(amd_checks, 3) << collector.log();
    EXPECT_EQ(collector.stop(), 0) << collector.log();
}

/// Frames of `reader` until one carries `devices` GPU device records (following new generations), or 15 s.
std::optional<keplershm::FrameView> frame_with_devices(keplershm::Reader& reader, size_t devices) {
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (std::chrono::steady_clock::now() < deadline) {
        keplershm::FrameView f;
        if (reader.next(1s, f) == keplershm::Status::ok && f.gpu_devices().size() == devices) return f;
    }
    return std::nullopt;
}

// A GPU added while the collector runs (hot-plug, or a GPU the driver shows later): within --gpu-rescan the
// collector discovers its meters again and publishes a new generation with the GPU's zone; a reader that
// follows the name reads on.
TEST(GpuEndToEnd, AGpuAddedWhileRunningIsPublishedInANewGeneration) {
    TempDir empty_sysfs;
    BusyChild child(testing::test_cpu(), 0.3);
    json one = scenario_for(child.pid());
    one["devices"].erase(1);
    Scenario scenario(one);
    const std::string name = testing::unique_segment_name("kc-gpu-hotplug");
    std::vector<std::string> args = collector_args(name, empty_sysfs, "auto");
    args.insert(args.end(), {"--gpu-rescan", "600ms"});
    Collector collector(args);
    keplershm::Reader reader = open_when_ready(name, collector);
    const std::optional<keplershm::FrameView> before = frame_with_devices(reader, 1);
    ASSERT_TRUE(before) << collector.log();
    EXPECT_EQ(before->segment().zone_count, 1u);
    const uint64_t generation = before->generation();

    scenario.write(scenario_for(child.pid()));  // GPU 1 appears
    const std::optional<keplershm::FrameView> after = frame_with_devices(reader, 2);
    ASSERT_TRUE(after) << "no frame with the new GPU; the log:\n" << collector.log();
    EXPECT_NE(after->generation(), generation) << "a new zone set is a new generation";
    EXPECT_EQ(after->segment().zone_count, 2u);
    EXPECT_EQ(keplershm::get_text(after->gpu_devices()[1].uuid), "GPU-e2e00000-0000-0000-0000-000000000001");
    EXPECT_NE(collector.log().find("the node's GPUs changed"), std::string::npos) << collector.log();
    // Once: the set that was discovered again is the node's, so no further generation follows.
    const uint64_t new_generation = after->generation();
    for (int i = 0; i < 6; ++i) {
        keplershm::FrameView f;
        ASSERT_EQ(reader.next(5s, f), keplershm::Status::ok) << collector.log();
        EXPECT_EQ(f.generation(), new_generation);
    }
    EXPECT_EQ(collector.stop(), 0) << collector.log();
}

// NVIDIA's driver loaded after the collector started (the GPU Operator's driver container): no GPU at
// start, then the GPUs in a new generation, without a restart.
TEST(GpuEndToEnd, GpusOfADriverLoadedAfterTheCollectorStartedArePublished) {
    TempDir empty_sysfs, later;
    BusyChild child(testing::test_cpu(), 0.3);
    const std::filesystem::path path = later.path() / "scenario.json";
    setenv("FAKE_NVML_SCENARIO", path.c_str(), 1);  // no file yet: the fake's driver is not loaded
    const std::string name = testing::unique_segment_name("kc-gpu-late");
    std::vector<std::string> args = collector_args(name, empty_sysfs, "auto");
    args.insert(args.end(), {"--gpu-rescan", "600ms"});
    Collector collector(args);
    unsetenv("FAKE_NVML_SCENARIO");
    keplershm::Reader reader = open_when_ready(name, collector);
    ASSERT_TRUE(frame_with_devices(reader, 0)) << collector.log();
    EXPECT_EQ(reader.info().zone_count, 0u);

    later.write("scenario.json", scenario_for(child.pid()).dump());
    const std::optional<keplershm::FrameView> loaded = frame_with_devices(reader, 2);
    ASSERT_TRUE(loaded) << "no frame with the GPUs; the log:\n" << collector.log();
    EXPECT_EQ(loaded->segment().zone_count, 2u);
    EXPECT_EQ(collector.stop(), 0) << collector.log();
}

TEST(GpuEndToEnd, GpuOffPublishesNoGpuZonesOrSections) {
    TempDir empty_sysfs;
    BusyChild child(testing::test_cpu(), 0.3);
    Scenario scenario(scenario_for(child.pid()));  // a GPU there to be found, were it not off
    const std::string name = testing::unique_segment_name("kc-gpu-off");
    Collector collector(collector_args(name, empty_sysfs, "off"));
    keplershm::Reader reader = open_when_ready(name, collector);
    const keplershm_segment_info info = reader.info();
    EXPECT_EQ(info.zone_count, 0u) << collector.log();
    EXPECT_EQ(info.header->gpu_device_capacity, 0u);
    EXPECT_EQ(info.header->gpu_usage_capacity, 0u);
    for (int i = 0; i < 3; ++i) {
        keplershm::FrameView f;
        ASSERT_EQ(reader.next(5s, f), keplershm::Status::ok) << collector.log();
        EXPECT_EQ(f.gpu_devices().size(), 0u);
        EXPECT_EQ(f.gpu_usage().size(), 0u);
        EXPECT_EQ(f.zones().size(), 0u);
        const keplershm_section* devices = f.find_section(KEPLERSHM_SECTION_GPU_DEVICES);
        const keplershm_section* usage = f.find_section(KEPLERSHM_SECTION_GPU_USAGE);
        EXPECT_TRUE(devices == nullptr || devices->count == 0);
        EXPECT_TRUE(usage == nullptr || usage->count == 0);
    }
    EXPECT_EQ(collector.stop(), 0) << collector.log();
    EXPECT_EQ(collector.log().find("nvml"), std::string::npos) << "NVML not even loaded:\n" << collector.log();
}

}  // namespace
}  // namespace kepler::collect
