// AMD and Intel GPUs through the kernel, on fake sysfs and /proc trees laid out as the kernel lays them:
// DRM cards with their uevent and hwmon meter, and the DRM client usage stats of
// Documentation/gpu/drm-usage-stats.rst in /proc/<pid>/fdinfo, found through /proc/<pid>/fd links to
// /dev/dri/. The fdinfo texts follow what amdgpu, i915 and xe print.
#include <unistd.h>

#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/text_io.hpp"
#include "energy/energy.hpp"
#include "energy/gpu/drm_fdinfo.hpp"
#include "energy/gpu/gpu_source.hpp"
#include "keplershm/keplershm.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

using testing::TempDir;

std::string amdgpu_fdinfo(uint64_t client, uint64_t gfx_ns, uint64_t compute_ns) {
    return "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1051\ndrm-driver:\tamdgpu\ndrm-client-id:\t" + std::to_string(client) +
           "\ndrm-pdev:\t0000:03:00.0\npasid:\t32770\ndrm-memory-vram:\t4096 KiB\ndrm-memory-gtt: \t2048 KiB\n"
           "drm-memory-cpu: \t0 KiB\ndrm-engine-gfx:\t" + std::to_string(gfx_ns) + " ns\ndrm-engine-compute:\t" +
           std::to_string(compute_ns) + " ns\ndrm-engine-dec:\t0 ns\n";
}

std::string xe_fdinfo(uint64_t client, uint64_t cycles, uint64_t total) {
    return "pos:\t0\nflags:\t02100002\ndrm-driver:\txe\ndrm-client-id:\t" + std::to_string(client) +
           "\ndrm-pdev:\t0000:00:02.0\ndrm-total-system:\t0\ndrm-resident-vram0:\t8 MiB\ndrm-total-vram0:\t16 MiB\n"
           "drm-cycles-rcs:\t" + std::to_string(cycles) + "\ndrm-total-cycles-rcs:\t" + std::to_string(total) +
           "\ndrm-cycles-bcs:\t0\ndrm-total-cycles-bcs:\t" + std::to_string(total) + "\ndrm-engine-capacity-ccs:\t4\n";
}

void link_fd(const TempDir& proc, uint32_t pid, int fd, const std::string& target) {
    const std::filesystem::path dir = proc.path() / std::to_string(pid) / "fd";
    std::filesystem::create_directories(dir);
    std::filesystem::create_symlink(target, dir / std::to_string(fd));
}

void set_fdinfo(const TempDir& proc, uint32_t pid, int fd, const std::string& text) {
    proc.write(std::to_string(pid) + "/fdinfo/" + std::to_string(fd), text);
}

/// card0: an amdgpu board with power1_average; card0-DP-1 its connector; card1: an xe GPU counting energy;
/// card2: NVIDIA's own driver (read through NVML, not here). hwmon5 is card0's meter seen from class/hwmon.
void write_cards(const TempDir& sys) {
    sys.write("class/drm/card0/device/uevent", "DRIVER=amdgpu\nPCI_CLASS=30000\nPCI_ID=1002:744C\nPCI_SLOT_NAME=0000:03:00.0\n");
    sys.write("class/drm/card0/device/product_name", "AMD Radeon RX 7900 XTX\n");
    sys.write("class/drm/card0/device/hwmon/hwmon5/name", "amdgpu\n");
    sys.write("class/drm/card0/device/hwmon/hwmon5/power1_average", "60000000\n");
    sys.write("class/drm/card0-DP-1/status", "connected\n");
    sys.write("class/drm/card1/device/uevent", "DRIVER=xe\nPCI_ID=8086:E20B\nPCI_SLOT_NAME=0000:00:02.0\n");
    sys.write("class/drm/card1/device/hwmon/hwmon6/name", "xe\n");
    sys.write("class/drm/card1/device/hwmon/hwmon6/energy1_input", "1000000\n");
    sys.write("class/drm/card2/device/uevent", "DRIVER=nvidia\nPCI_SLOT_NAME=0000:17:00.0\n");
    sys.write("class/hwmon/hwmon5/name", "amdgpu\n");
    sys.write("class/hwmon/hwmon5/power1_average", "60000000\n");
}

TEST(DrmFdinfo, ParsesAmdgpuI915AndXeAndRefusesWhatIsNotAClient) {
    const auto amd = parse_drm_fdinfo(amdgpu_fdinfo(7, 1000, 500));
    ASSERT_TRUE(amd);
    EXPECT_EQ(amd->driver, "amdgpu");
    EXPECT_EQ(amd->pdev, "0000:03:00.0");
    EXPECT_EQ(amd->client_id, 7u);
    EXPECT_TRUE(amd->has_engine_ns);
    EXPECT_EQ(amd->engine_ns, 1500u) << "every engine's time";
    EXPECT_EQ(amd->memory_bytes, 4096u * 1024) << "VRAM only, not GTT or system memory";

    const auto intel = parse_drm_fdinfo("drm-driver:\ti915\ndrm-pdev:\t0000:00:02.0\ndrm-client-id:\t3\n"
                                        "drm-engine-render:\t250000000 ns\ndrm-engine-copy:\t0 ns\ndrm-engine-capacity-video:\t2\n");
    ASSERT_TRUE(intel);
    EXPECT_EQ(intel->engine_ns, 250'000'000u) << "a capacity is not time";

    const auto xe = parse_drm_fdinfo(xe_fdinfo(9, 400, 1000));
    ASSERT_TRUE(xe);
    EXPECT_FALSE(xe->has_engine_ns);
    EXPECT_TRUE(xe->has_cycles);
    EXPECT_EQ(xe->cycles, 400u);
    EXPECT_EQ(xe->total_cycles, 1000u);
    EXPECT_EQ(xe->memory_bytes, 8u << 20) << "resident VRAM, not its total";

    EXPECT_FALSE(parse_drm_fdinfo("pos:\t0\nflags:\t0100002\nmnt_id:\t24\n")) << "an ordinary file";
    EXPECT_FALSE(parse_drm_fdinfo("drm-driver:\tamdgpu\ndrm-client-id:\t1\n")) << "no device named";
    EXPECT_FALSE(parse_drm_fdinfo("drm-driver:\tx\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t-1\n")) << "no valid client id";
    const auto hostile = parse_drm_fdinfo("drm-pdev: a\ndrm-client-id: 1\ndrm-engine-gfx: 18446744073709551615 ns\n"
                                          "drm-engine-compute: 5 ns\ndrm-memory-vram: 99999999999999999999 KiB\n"
                                          "drm-engine-dec: 12 parsecs\n");
    ASSERT_TRUE(hostile);
    EXPECT_EQ(hostile->engine_ns, UINT64_MAX) << "sums saturate, never wrap";
    EXPECT_EQ(hostile->memory_bytes, 0u) << "an overflowing or unitless-garbage value is ignored";
}

TEST(DrmSource, CardsWithTheirMetersAndHwmonLeavesGpusToThem) {
    TempDir sys, proc;
    write_cards(sys);
    std::string why;
    std::unique_ptr<GpuSource> drm = make_drm_source(DrmSettings{sys.path(), proc.path()}, why);
    ASSERT_TRUE(drm) << why;
    ASSERT_EQ(drm->zones().size(), 2u);
    EXPECT_EQ(keplershm::get_text(drm->zones()[0].name), "gpu-0");
    EXPECT_EQ(drm->zones()[0].kind, static_cast<uint32_t>(KEPLERSHM_ZONE_GPU));
    EXPECT_EQ(drm->zones()[1].socket, 1u);
    ASSERT_EQ(drm->devices().size(), 2u) << "NVIDIA's own driver is NVML's";
    const keplershm_gpu_device& amd = drm->devices()[0];
    EXPECT_EQ(amd.vendor, static_cast<uint32_t>(KEPLERSHM_GPU_AMD));
    EXPECT_EQ(keplershm::get_text(amd.name), "AMD Radeon RX 7900 XTX");
    EXPECT_EQ(keplershm::get_text(amd.pci_bus_id), "0000:03:00.0");
    EXPECT_EQ(amd.zone_index, 0u);
    EXPECT_EQ(drm->devices()[1].vendor, static_cast<uint32_t>(KEPLERSHM_GPU_INTEL));
    EXPECT_EQ(keplershm::get_text(drm->devices()[1].name), "xe 8086:E20B");

    // The amdgpu meter under class/hwmon is the same meter: hwmon discovery leaves it to the card.
    EnergyMeter meter = EnergyMeter::discover(sys.path());
    EXPECT_TRUE(meter.empty());
    meter.add_gpu_source(std::move(drm));
    EXPECT_EQ(meter.zone_infos().size(), 2u);
    EXPECT_EQ(meter.gpu_device_count(), 2u);

    // Energy: the xe counter steps by 5 J, in 10 ms or more (500 W: a step the card can draw, under its
    // ceiling); the amdgpu power is integrated (60 W).
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    sys.write("class/drm/card1/device/hwmon/hwmon6/energy1_input", "6000000\n");
    const std::vector<keplershm_zone_sample> samples = meter.read();
    ASSERT_EQ(samples.size(), 2u);
    EXPECT_TRUE(samples[0].flags & KEPLERSHM_ZONE_INTEGRATED);
    EXPECT_EQ(samples[1].energy_delta_uj, 5'000'000u);
}

// Two GPU sources both number their zones from gpu-0 (NVML by its index, DRM by its card: on a node
// whose NVIDIA GPUs register no DRM card, an AMD card0 is gpu-0 too). The segment's zone names stay
// unique: the later source's colliding zones take the next free numbers, and a note says so.
TEST(DrmSource, ZoneNamesStayUniqueAcrossGpuSources) {
    TempDir sys, proc;
    write_cards(sys);
    std::string why;
    EnergyMeter meter;
    for (int source = 0; source < 2; ++source) {
        std::unique_ptr<GpuSource> drm = make_drm_source(DrmSettings{sys.path(), proc.path()}, why);
        ASSERT_TRUE(drm) << why;
        meter.add_gpu_source(std::move(drm));
    }
    std::vector<std::string> names;
    for (const keplershm_zone_info& z : meter.zone_infos()) names.emplace_back(keplershm::get_text(z.name));
    EXPECT_EQ(names, (std::vector<std::string>{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}));
    ASSERT_EQ(meter.notes().size(), 2u);
    EXPECT_NE(meter.notes()[0].find("zone gpu-0 of"), std::string::npos) << meter.notes()[0];
    EXPECT_NE(meter.notes()[0].find("is named gpu-2 in the segment"), std::string::npos) << meter.notes()[0];
    std::vector<keplershm_gpu_device> devices;
    std::vector<GpuProcessUse> uses;
    meter.read();
    meter.read_gpus(devices, uses, 0);
    ASSERT_EQ(devices.size(), 4u);
    EXPECT_EQ(devices[2].zone_index, 2u) << "the renamed zones keep their place";
}

TEST(DrmSource, ProcessesAreAttributedByEngineTimeAndCyclesAndADupdClientCountsOnce) {
    TempDir sys, proc;
    write_cards(sys);
    link_fd(proc, 100, 3, "/dev/dri/renderD128");
    link_fd(proc, 100, 4, "/dev/null");
    set_fdinfo(proc, 100, 3, amdgpu_fdinfo(7, 1'000'000'000, 0));
    set_fdinfo(proc, 100, 4, "pos:\t0\nflags:\t0100002\n");
    link_fd(proc, 101, 9, "/dev/dri/renderD128");  // 100's client handed over (fork, SCM_RIGHTS)
    set_fdinfo(proc, 101, 9, amdgpu_fdinfo(7, 1'000'000'000, 0));
    link_fd(proc, 200, 5, "/dev/dri/card1");
    set_fdinfo(proc, 200, 5, xe_fdinfo(2, 1000, 10'000));
    proc.write("300/stat", "300 (idle) S\n");  // a process without GPU files

    std::string why;
    std::unique_ptr<GpuSource> drm = make_drm_source(DrmSettings{sys.path(), proc.path()}, why);
    ASSERT_TRUE(drm) << why;
    std::vector<GpuProcessUse> uses;
    drm->read_usage(uses, 0);
    ASSERT_EQ(uses.size(), 2u) << "100 and 200; 101 holds 100's client";
    for (const GpuProcessUse& u : uses) EXPECT_FALSE(u.flags & KEPLERSHM_GPU_USE_BUSY_VALID) << "the first scan is a baseline";
    EXPECT_TRUE(drm->devices()[0].flags & KEPLERSHM_GPU_USAGE_VALID);

    // 300 ms more on the amdgpu gfx + 100 ms compute; xe: 25 % of its cycles busy since the last scan.
    set_fdinfo(proc, 100, 3, amdgpu_fdinfo(7, 1'300'000'000, 100'000'000));
    set_fdinfo(proc, 101, 9, amdgpu_fdinfo(7, 1'300'000'000, 100'000'000));
    set_fdinfo(proc, 200, 5, xe_fdinfo(2, 3500, 20'000));
    const uint64_t before = monotonic_now_ns();
    usleep(50'000);
    drm->read_usage(uses, 0);
    const uint64_t elapsed = monotonic_now_ns() - before;
    std::map<uint32_t, GpuProcessUse> by_pid;
    for (const GpuProcessUse& u : uses) by_pid[u.pid] = u;
    ASSERT_EQ(by_pid.size(), 2u);
    EXPECT_EQ(by_pid[100].busy_ns, 400'000'000u);
    EXPECT_EQ(by_pid[100].device, 0u);
    EXPECT_EQ(by_pid[100].memory_bytes, 4096u * 1024);
    EXPECT_TRUE(by_pid[100].flags & KEPLERSHM_GPU_USE_BUSY_VALID);
    EXPECT_EQ(by_pid[200].device, 1u);
    // busy = 25 % of the time between the two scans, which is at least the 50 ms slept and at most
    // what elapsed around the second scan plus the first scan's own duration (bounded here by 1 s).
    EXPECT_GE(by_pid[200].busy_ns, 50'000'000u / 4);
    EXPECT_LE(by_pid[200].busy_ns, (elapsed + 1'000'000'000ull) / 4);
    EXPECT_EQ(drm->devices()[0].memory_used_bytes, 4096u * 1024);

    // A process gone and its client closed: no use, no stale state.
    std::filesystem::remove_all(proc.path() / "200");
    drm->read_usage(uses, 0);
    ASSERT_EQ(uses.size(), 1u);
    EXPECT_EQ(uses[0].pid, 100u);
}

TEST(DrmSource, ACardAddedIsANewDeviceAndOnlyThen) {
    TempDir sys, proc;
    EXPECT_FALSE(drm_finds_cards(DrmSettings{sys.path(), proc.path()}));
    write_cards(sys);
    EXPECT_TRUE(drm_finds_cards(DrmSettings{sys.path(), proc.path()}));
    std::string why;
    const std::unique_ptr<GpuSource> drm = make_drm_source(DrmSettings{sys.path(), proc.path()}, why);
    ASSERT_TRUE(drm) << why;
    EXPECT_FALSE(drm->new_devices()) << "the cards as discovered (card2 is NVIDIA's: never this source's)";
    sys.write("class/drm/card3/device/uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:83:00.0\n");
    EXPECT_TRUE(drm->new_devices()) << "a hot-plugged card";
}

// An integrated GPU without a hwmon meter (i915 on most laptops and many servers' iGPUs): no zone, but the
// card is the meter's, its use is published, and a rescan finds nothing new (it made a new segment
// generation at every --gpu-rescan when the zone-less source was dropped).
TEST(DrmSource, ACardWithoutAMeterIsKeptForItsUseAndIsNoNewDeviceAtARescan) {
    TempDir sys, proc;
    sys.write("class/drm/card0/device/uevent", "DRIVER=i915\nPCI_CLASS=30000\nPCI_ID=8086:A7A0\nPCI_SLOT_NAME=0000:00:02.0\n");
    link_fd(proc, 100, 3, "/dev/dri/renderD128");
    proc.write("100/fdinfo/3", "drm-driver:\ti915\ndrm-pdev:\t0000:00:02.0\ndrm-client-id:\t3\ndrm-engine-render:\t250000000 ns\n");
    std::string why;
    std::unique_ptr<GpuSource> drm = make_drm_source(DrmSettings{sys.path(), proc.path()}, why);
    ASSERT_TRUE(drm) << why;
    EXPECT_TRUE(drm->zones().empty());
    EnergyMeter meter = EnergyMeter::discover(sys.path());
    meter.add_gpu_source(std::move(drm));
    EXPECT_TRUE(meter.empty()) << "no energy zone";
    EXPECT_TRUE(meter.has_gpu_source("drm")) << "the card is this meter's";
    EXPECT_FALSE(meter.gpu_sources_have_new_devices()) << "a rescan finds the card it knows";
    std::vector<keplershm_gpu_device> devices;
    std::vector<GpuProcessUse> uses;
    meter.read_gpus(devices, uses, monotonic_now_ns());
    ASSERT_EQ(devices.size(), 1u);
    EXPECT_EQ(devices[0].zone_index, 0xffffffffu) << "no zone";
    ASSERT_EQ(uses.size(), 1u) << "its use is published";
    EXPECT_EQ(uses[0].pid, 100u);
}

// Processes holding many descriptors (any local user can) do not stretch a frame: at most fd_budget
// descriptors are looked at per read, processes never scanned first, so a GPU user behind them is found
// a few reads later, and until every process was scanned the GPU's users are not claimed complete.
TEST(DrmSource, TheDescriptorScanKeepsToItsBudgetPerReadAndReachesEveryProcess) {
    TempDir sys, proc;
    write_cards(sys);
    for (uint32_t pid = 10; pid < 15; ++pid) {  // five processes with 60 descriptors each, none a GPU's
        for (int fd = 0; fd < 60; ++fd) link_fd(proc, pid, fd, "/dev/null");
    }
    link_fd(proc, 20, 3, "/dev/dri/renderD128");  // the GPU user: listed after them
    set_fdinfo(proc, 20, 3, amdgpu_fdinfo(7, 1'000'000'000, 0));
    std::string why;
    DrmSettings settings{sys.path(), proc.path()};
    settings.fd_budget = 100;
    std::unique_ptr<GpuSource> drm = make_drm_source(settings, why);
    ASSERT_TRUE(drm) << why;
    std::vector<GpuProcessUse> uses;
    int reads = 0;
    for (; reads < 10 && uses.empty(); ++reads) {
        drm->read_usage(uses, 0);
        if (uses.empty()) {
            EXPECT_FALSE(drm->devices()[0].flags & KEPLERSHM_GPU_USAGE_VALID) << "read " << reads << ": users not all seen";
        }
    }
    ASSERT_EQ(uses.size(), 1u) << "the GPU user was never reached";
    EXPECT_EQ(uses[0].pid, 20u);
    EXPECT_EQ(reads, 5) << "60 descriptors a process, 100 a read: one process a read (the next waits), the user with the fifth";
    EXPECT_TRUE(drm->devices()[0].flags & KEPLERSHM_GPU_USAGE_VALID) << "every process scanned";
}

TEST(DrmSource, NoCardMeansNoSourceAndSaysWhy) {
    TempDir sys, proc;
    sys.write("class/drm/card0/device/uevent", "DRIVER=nvidia\n");
    std::string why;
    EXPECT_FALSE(make_drm_source(DrmSettings{sys.path(), proc.path()}, why));
    EXPECT_NE(why.find("no amdgpu"), std::string::npos) << why;
}

}  // namespace
}  // namespace kepler::collect
