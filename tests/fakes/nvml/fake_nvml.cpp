// fake_nvml.cpp — a fake libnvidia-ml.so.1: NVIDIA NVML's C entry points at the real ABI, answering from a
// JSON scenario file instead of a GPU, so that code loading NVML with dlopen/dlsym runs without one.
//
// It follows the contracts written in NVIDIA's nvml.h (go-nvml's copy, pkg/nvml/nvml.h): init reference
// counting, UNINITIALIZED before init, INVALID_ARGUMENT for NULL outputs and unknown handles,
// INSUFFICIENT_SIZE for short string buffers, the two-call size protocol of *RunningProcesses_v3 and of
// nvmlDeviceGetProcessUtilization, NOT_SUPPORTED for process utilization on a MIG-enabled GPU.
//
// The scenario (scenario.hpp) is the file named by FAKE_NVML_SCENARIO, read at init and again whenever its
// (device, inode, size, mtime) changes, checked at every call, so a test steers a running collector by
// renaming a new file into place. What a driver keeps between calls — the energy counter, the utilization
// sample ring — lives here, per device position, and survives re-reads.
//
// Built twice: as is (a current driver), and with FAKE_NVML_OLD_DRIVER, which leaves out
// nvmlDeviceGetTotalEnergyConsumption and every MIG call, as a pre-Volta-era driver's library does.
// One mutex serialises every call: NVML is thread-safe and the fake's state is small.
#include "nvml_abi.hpp"
#include "scenario.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#define FAKE_NVML_API extern "C" __attribute__((visibility("default")))

// The opaque type behind nvmlDevice_t: which GPU (position in the scenario) and, for a MIG device handle,
// which entry of its mig_devices. Handles are allocated once and never freed, so a caller's copy stays valid.
struct nvmlDevice_st {
    unsigned gpu = 0;
    int mig = -1;  // -1: the full GPU
};

// The opaque type behind nvmlGpmSample_t: what nvmlGpmMigSampleGet took, for nvmlGpmMetricsGet.
struct nvmlGpmSample_st {
    bool taken = false;
    unsigned gpu = 0;
    unsigned gpu_instance = 0;
    double time_s = 0.0;    // CLOCK_MONOTONIC
    double active_s = 0.0;  // the GPU instance's active time so far
};

namespace fake_nvml {
namespace {

#ifdef FAKE_NVML_OLD_DRIVER
constexpr bool kOldDriver = true;
#else
constexpr bool kOldDriver = false;
#endif
constexpr unsigned kNoInstance = 0xFFFFFFFFu;          // gpuInstanceId / computeInstanceId outside MIG
constexpr long long kSamplePeriodUs = 100'000;         // the driver samples process utilization every 100 ms…
constexpr long long kSampleHistoryUs = 10'000'000;     // …and keeps a ring of about the last 10 s
constexpr unsigned kMaxMigDevices = 7;                 // what an A100/H100 reports in MIG mode

double monotonic_s() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

long long realtime_us() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<long long>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

// The processes' utilization from `from_us` on (CLOCK_REALTIME µs): what samples taken then report.
struct UtilSegment {
    long long from_us = 0;
    std::vector<Process> processes;
};

// A GPU instance's graphics activity (GPM): `percent` from `since_s` on, `active_s` integrated before.
struct GpmActivity {
    double percent = 0.0;
    double since_s = 0.0;
    double active_s = 0.0;
};

// What the driver keeps for one GPU between calls and across scenario re-reads.
struct DeviceRuntime {
    double power_w = 0.0;
    double since_s = 0.0;       // CLOCK_MONOTONIC time from which power_w applies
    double energy_mj = 0.0;     // integrated up to since_s
    long long generation = 0;   // driver_generation the integral belongs to
    long long origin_us = 0;    // first sight (CLOCK_REALTIME µs): the sampling grid starts here
    std::vector<UtilSegment> util;  // oldest first; the first one covers the ring's oldest sample
    std::map<unsigned, GpmActivity> gpm;  // by GPU instance id
};

struct FileKey {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    long long mtime_ns = 0;
    bool operator==(const FileKey&) const = default;
};

struct State {
    std::mutex mutex;
    int refcount = 0;
    std::string path;  // FAKE_NVML_SCENARIO as of the init that attached it
    FileKey key;       // of the last file read, good or malformed (a malformed one is not re-parsed)
    bool have_key = false;
    Scenario scenario;
    std::vector<DeviceRuntime> runtime;  // by position in scenario.devices; never shrinks
    std::vector<std::unique_ptr<nvmlDevice_st>> gpu_handles;  // by position; never shrinks
    std::map<std::pair<unsigned, unsigned>, std::unique_ptr<nvmlDevice_st>> mig_handles;
    std::set<const nvmlDevice_st*> issued;  // every handle given out: how a foreign pointer is told apart
    std::set<nvmlGpmSample_st*> gpm_samples;  // allocated and not yet freed
};

State& state() {
    static State s;
    return s;
}

bool mig_enabled(const Device& d) { return !kOldDriver && d.mig_mode == NVML_DEVICE_MIG_ENABLE; }

bool utilization_changed(const std::vector<Process>& a, const std::vector<Process>& b) {
    if (a.size() != b.size()) return true;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].pid != b[i].pid || a[i].sm_util != b[i].sm_util || a[i].mem_util != b[i].mem_util) return true;
    return false;
}

DeviceRuntime first_sight(const Device& d, double now_s, long long now_us) {
    DeviceRuntime rt;
    rt.power_w = d.power_w;
    rt.since_s = now_s;
    rt.generation = d.driver_generation;
    rt.origin_us = now_us;
    rt.util.push_back({now_us, d.processes});
    return rt;
}

// Energy so far is kept when the power changes (the new power applies from now); a new driver generation
// is a driver reload, which restarts the counter at zero.
void advance_energy(DeviceRuntime& rt, const Device& d, double now_s) {
    if (d.driver_generation != rt.generation) {
        rt.generation = d.driver_generation;
        rt.energy_mj = 0.0;
        rt.since_s = now_s;
    } else if (d.power_w != rt.power_w) {
        rt.energy_mj += rt.power_w * (now_s - rt.since_s) * 1000.0;
        rt.since_s = now_s;
    }
    rt.power_w = d.power_w;
}

// Each GPU instance's activity so far is kept when its percentage changes (the new one applies from now).
void advance_gpm(DeviceRuntime& rt, const Device& d, double now_s) {
    for (const MigDevice& m : d.mig_devices) {
        auto [it, added] = rt.gpm.try_emplace(m.gpu_instance_id, GpmActivity{m.gr_active_percent, now_s, 0.0});
        if (added) continue;
        GpmActivity& a = it->second;
        if (a.percent == m.gr_active_percent) continue;
        a.active_s += a.percent / 100.0 * (now_s - a.since_s);
        a.since_s = now_s;
        a.percent = m.gr_active_percent;
    }
}

// A new segment when the utilization changed; segments wholly older than the ring are dropped.
void advance_utilization(DeviceRuntime& rt, const Device& d, long long now_us) {
    if (utilization_changed(rt.util.back().processes, d.processes)) rt.util.push_back({now_us, d.processes});
    while (rt.util.size() > 1 && rt.util[1].from_us <= now_us - kSampleHistoryUs) rt.util.erase(rt.util.begin());
}

void apply(State& s, Scenario next) {
    const double now_s = monotonic_s();
    const long long now_us = realtime_us();
    for (std::size_t i = 0; i < next.devices.size(); ++i) {
        const Device& d = next.devices[i];
        if (i == s.runtime.size()) {
            s.runtime.push_back(first_sight(d, now_s, now_us));
        } else {
            advance_energy(s.runtime[i], d, now_s);
            advance_utilization(s.runtime[i], d, now_us);
        }
        advance_gpm(s.runtime[i], d, now_s);
    }
    s.scenario = std::move(next);
}

// Reads the scenario through one descriptor, so the key and the text belong to the same file even while
// a test renames a new one into place. False when unreadable or malformed (the caller keeps what it had).
bool load(State& s, bool force) {
    const int fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    std::string text;
    bool ok = ::fstat(fd, &st) == 0;
    const FileKey key{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec};
    if (ok && !force && s.have_key && key == s.key) {
        ::close(fd);
        return true;
    }
    char buffer[8192];
    for (ssize_t n; ok && (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
        if (n < 0) ok = false;
        else text.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
    if (!ok) return false;
    s.key = key;
    s.have_key = true;
    auto parsed = parse_scenario(text);
    if (!parsed) return false;
    apply(s, std::move(*parsed));
    return true;
}

nvmlDevice_t gpu_handle(State& s, unsigned index) {
    while (s.gpu_handles.size() <= index) {
        s.gpu_handles.push_back(std::make_unique<nvmlDevice_st>());
        s.gpu_handles.back()->gpu = static_cast<unsigned>(s.gpu_handles.size() - 1);
        s.issued.insert(s.gpu_handles.back().get());
    }
    return s.gpu_handles[index].get();
}

[[maybe_unused]] nvmlDevice_t mig_handle(State& s, unsigned gpu, unsigned mig) {  // unused in the old driver
    auto& slot = s.mig_handles[{gpu, mig}];
    if (!slot) {
        slot = std::make_unique<nvmlDevice_st>();
        slot->gpu = gpu;
        slot->mig = static_cast<int>(mig);
        s.issued.insert(slot.get());
    }
    return slot.get();
}

nvmlReturn_t error_override(const Device& d, const char* function) {
    const auto it = d.errors.find(function);
    return it == d.errors.end() ? NVML_SUCCESS : static_cast<nvmlReturn_t>(it->second);
}

// What a per-device call works on, once the handle has been checked against the current scenario.
struct Target {
    State& state;
    unsigned index;
    const Device& gpu;
    DeviceRuntime& runtime;
    const MigDevice* mig;  // null for a full GPU handle
};

// The common part of every library-wide call: lock, the init check, and a look at the scenario file.
template <typename Body>
nvmlReturn_t with_library(Body&& body) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (s.refcount == 0) return NVML_ERROR_UNINITIALIZED;
    load(s, false);
    return body(s);
}

// The common part of every per-device call: a handle this library gave out, a GPU still present and not
// lost, the scenario's error for `function`, a MIG device that still exists.
template <typename Body>
nvmlReturn_t with_device(const char* function, nvmlDevice_t handle, Body&& body) {
    return with_library([&](State& s) -> nvmlReturn_t {
        if (!s.issued.contains(handle)) return NVML_ERROR_INVALID_ARGUMENT;
        if (handle->gpu >= s.scenario.devices.size()) return NVML_ERROR_GPU_IS_LOST;
        const Device& gpu = s.scenario.devices[handle->gpu];
        if (gpu.lost) return NVML_ERROR_GPU_IS_LOST;
        if (nvmlReturn_t e = error_override(gpu, function); e != NVML_SUCCESS) return e;
        const MigDevice* mig = nullptr;
        if (handle->mig >= 0) {
            const auto m = static_cast<std::size_t>(handle->mig);
            if (!mig_enabled(gpu) || m >= gpu.mig_devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
            mig = &gpu.mig_devices[m];
        }
        return body(Target{s, handle->gpu, gpu, s.runtime[handle->gpu], mig});
    });
}

nvmlReturn_t copy_string(const std::string& value, char* out, unsigned length) {
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (length < value.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
    std::memcpy(out, value.c_str(), value.size() + 1);
    return NVML_SUCCESS;
}

template <typename T>
nvmlReturn_t set_output(T* out, T value) {
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *out = value;
    return NVML_SUCCESS;
}

nvmlReturn_t init() {
    State& s = state();
    std::lock_guard lock(s.mutex);
    const char* path = std::getenv("FAKE_NVML_SCENARIO");
    if (path == nullptr || *path == '\0') return NVML_ERROR_DRIVER_NOT_LOADED;
    // Another scenario file is another machine: its GPUs start fresh. The same file keeps its counters
    // across shutdown and init, as a driver does (its counter counts from the driver's load, not NVML's).
    if (s.refcount == 0 && s.path != path) {
        s.path = path;
        s.runtime.clear();
        s.have_key = false;
    }
    if (!load(s, s.refcount == 0)) {
        if (s.refcount == 0) return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    if (s.scenario.init_error != 0) return static_cast<nvmlReturn_t>(s.scenario.init_error);
    ++s.refcount;
    return NVML_SUCCESS;
}

void append_processes(std::vector<nvmlProcessInfo_t>& out, const std::vector<Process>& processes, bool graphics,
                      unsigned gpu_instance, unsigned compute_instance) {
    for (const Process& p : processes)
        if (graphics ? p.graphics : p.compute)
            out.push_back({p.pid, p.used_memory_bytes, gpu_instance, compute_instance});
}

// A MIG handle lists its own processes; a full GPU in MIG mode lists every MIG device's, with their ids.
std::vector<nvmlProcessInfo_t> running_processes(const Target& t, bool graphics) {
    std::vector<nvmlProcessInfo_t> out;
    if (t.mig != nullptr) {
        append_processes(out, t.mig->processes, graphics, t.mig->gpu_instance_id, t.mig->compute_instance_id);
    } else if (mig_enabled(t.gpu)) {
        for (const MigDevice& m : t.gpu.mig_devices)
            append_processes(out, m.processes, graphics, m.gpu_instance_id, m.compute_instance_id);
    } else {
        append_processes(out, t.gpu.processes, graphics, kNoInstance, kNoInstance);
    }
    return out;
}

// The two-call protocol: *count 0 (or too small) asks for the size; none running is SUCCESS with 0.
template <typename T>
nvmlReturn_t fill_array(const std::vector<T>& items, unsigned* count, T* out) {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < items.size()) {
        *count = static_cast<unsigned>(items.size());
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (!items.empty() && out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::copy(items.begin(), items.end(), out);
    *count = static_cast<unsigned>(items.size());
    return NVML_SUCCESS;
}

nvmlReturn_t list_processes(const char* function, nvmlDevice_t device, unsigned* count, nvmlProcessInfo_t* infos,
                            bool graphics) {
    return with_device(function, device, [&](const Target& t) {
        return fill_array(running_processes(t, graphics), count, infos);
    });
}

const UtilSegment& segment_at(const DeviceRuntime& rt, long long t_us) {
    std::size_t i = 0;
    while (i + 1 < rt.util.size() && rt.util[i + 1].from_us <= t_us) ++i;
    return rt.util[i];
}

// The ring as the driver would hold it now: a sample every period since first sight, the last 10 s of
// them, each with the utilization in effect at its time; only those after last_seen, oldest first.
std::vector<nvmlProcessUtilizationSample_t> samples_since(const DeviceRuntime& rt, unsigned long long last_seen) {
    const long long now_us = realtime_us();
    const long long oldest = std::max(rt.origin_us, now_us - kSampleHistoryUs + 1);
    long long k = (oldest - rt.origin_us + kSamplePeriodUs - 1) / kSamplePeriodUs;
    std::vector<nvmlProcessUtilizationSample_t> out;
    for (long long t = rt.origin_us + k * kSamplePeriodUs; t <= now_us; t += kSamplePeriodUs) {
        if (static_cast<unsigned long long>(t) <= last_seen) continue;
        for (const Process& p : segment_at(rt, t).processes)
            if (p.sm_util > 0 || p.mem_util > 0)
                out.push_back({p.pid, static_cast<unsigned long long>(t), p.sm_util, p.mem_util, 0, 0});
    }
    return out;
}

const char* error_string(nvmlReturn_t result) {
    switch (result) {
        case NVML_SUCCESS: return "Success";
        case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
        case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
        case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
        case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
        case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
        case NVML_ERROR_NOT_FOUND: return "Not Found";
        case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
        case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
        case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
        case NVML_ERROR_TIMEOUT: return "Timeout";
        case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
        case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
        case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
        case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
        case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
        case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
        case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
        case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
        case NVML_ERROR_IN_USE: return "In use by another client";
        case NVML_ERROR_MEMORY: return "Insufficient Memory";
        case NVML_ERROR_NO_DATA: return "No data";
        case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return "vGPU ECC is not supported";
        case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
        case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
        case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
        case NVML_ERROR_UNKNOWN: return "Unknown Error";
    }
    return "Unknown Error";
}

}  // namespace
}  // namespace fake_nvml

using namespace fake_nvml;  // the exported functions below are NVML's, in the global namespace

// ---- Library ----------------------------------------------------------------------------------------

FAKE_NVML_API nvmlReturn_t nvmlInit_v2(void) { return init(); }

FAKE_NVML_API nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) { return init(); }

// Shutdown balances Init; the counters and handles stay, as they do in the driver.
FAKE_NVML_API nvmlReturn_t nvmlShutdown(void) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (s.refcount == 0) return NVML_ERROR_UNINITIALIZED;
    --s.refcount;
    return NVML_SUCCESS;
}

FAKE_NVML_API const char* nvmlErrorString(nvmlReturn_t result) { return error_string(result); }

FAKE_NVML_API nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
    return with_library([&](State& s) { return copy_string(s.scenario.driver_version, version, length); });
}

FAKE_NVML_API nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
    return with_library([&](State& s) { return copy_string(s.scenario.nvml_version, version, length); });
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
    return with_library([&](State& s) {
        return set_output(deviceCount, static_cast<unsigned>(s.scenario.devices.size()));
    });
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
    return with_library([&](State& s) -> nvmlReturn_t {
        if (device == nullptr || index >= s.scenario.devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
        const Device& d = s.scenario.devices[index];
        if (d.lost) return NVML_ERROR_GPU_IS_LOST;
        if (nvmlReturn_t e = error_override(d, __func__); e != NVML_SUCCESS) return e;
        *device = gpu_handle(s, index);
        return NVML_SUCCESS;
    });
}

// ---- Identity ---------------------------------------------------------------------------------------

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
    return with_device(__func__, device, [&](const Target& t) {
        return t.mig != nullptr ? NVML_ERROR_NOT_SUPPORTED : set_output(index, t.index);
    });
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
    return with_device(__func__, device, [&](const Target& t) {
        return copy_string(t.mig != nullptr ? t.mig->uuid : t.gpu.uuid, uuid, length);
    });
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
    return with_device(__func__, device, [&](const Target& t) {
        return copy_string(t.mig != nullptr ? t.gpu.name + " MIG" : t.gpu.name, name, length);
    });
}

// "DDDDDDDD:BB:DD.F" (or the legacy "DDDD:BB:DD.F"); the ids are an H100 SXM's, which no test reads.
FAKE_NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
    return with_device(__func__, device, [&](const Target& t) -> nvmlReturn_t {
        if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        nvmlPciInfo_t info{};
        unsigned domain = 0, bus = 0, dev = 0, function = 0;
        if (std::sscanf(t.gpu.pci_bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &function) != 4)
            return NVML_ERROR_UNKNOWN;
        info.domain = domain;
        info.bus = bus;
        info.device = dev;
        info.pciDeviceId = 0x233010DEu;
        info.pciSubSystemId = 0x16C110DEu;
        std::snprintf(info.busId, sizeof info.busId, "%08X:%02X:%02X.%X", domain, bus, dev, function);
        std::snprintf(info.busIdLegacy, sizeof info.busIdLegacy, "%04X:%02X:%02X.%X", domain & 0xFFFFu, bus,
                      dev, function);
        *pci = info;
        return NVML_SUCCESS;
    });
}

// ---- Power and energy -------------------------------------------------------------------------------

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
    return with_device(__func__, device, [&](const Target& t) {
        if (t.mig != nullptr) return NVML_ERROR_NOT_SUPPORTED;
        return set_output(power, static_cast<unsigned>(std::llround(t.gpu.power_w * 1000.0)));
    });
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit) {
    return with_device(__func__, device, [&](const Target& t) {
        if (t.mig != nullptr) return NVML_ERROR_NOT_SUPPORTED;
        return set_output(limit, static_cast<unsigned>(std::llround(t.gpu.power_limit_w * 1000.0)));
    });
}

#ifndef FAKE_NVML_OLD_DRIVER
FAKE_NVML_API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy) {
    return with_device(__func__, device, [&](const Target& t) {
        if (t.mig != nullptr || !t.gpu.energy_supported) return NVML_ERROR_NOT_SUPPORTED;
        const DeviceRuntime& rt = t.runtime;
        const double mj = rt.energy_mj + rt.power_w * (monotonic_s() - rt.since_s) * 1000.0;
        return set_output(energy, t.gpu.energy_offset_mj + static_cast<unsigned long long>(mj));
    });
}
#endif

// ---- Processes --------------------------------------------------------------------------------------

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                                   nvmlProcessInfo_t* infos) {
    return list_processes(__func__, device, infoCount, infos, false);
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                                    nvmlProcessInfo_t* infos) {
    return list_processes(__func__, device, infoCount, infos, true);
}

// nvml.h: utilization NULL asks for the count (INSUFFICIENT_SIZE); nothing newer than lastSeenTimeStamp is
// NOT_FOUND; "On MIG-enabled GPUs, querying process utilization is not currently supported".
FAKE_NVML_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                           nvmlProcessUtilizationSample_t* utilization,
                                                           unsigned int* processSamplesCount,
                                                           unsigned long long lastSeenTimeStamp) {
    return with_device(__func__, device, [&](const Target& t) -> nvmlReturn_t {
        if (processSamplesCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        if (t.mig != nullptr || mig_enabled(t.gpu)) return NVML_ERROR_NOT_SUPPORTED;
        const auto samples = samples_since(t.runtime, lastSeenTimeStamp);
        if (samples.empty()) return NVML_ERROR_NOT_FOUND;
        if (utilization == nullptr) {
            *processSamplesCount = static_cast<unsigned>(samples.size());
            return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        return fill_array(samples, processSamplesCount, utilization);
    });
}

// ---- MIG (Ampere and later drivers) -----------------------------------------------------------------

#ifndef FAKE_NVML_OLD_DRIVER
FAKE_NVML_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                                unsigned int* pendingMode) {
    return with_device(__func__, device, [&](const Target& t) -> nvmlReturn_t {
        if (currentMode == nullptr || pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        if (t.mig != nullptr) return NVML_ERROR_NOT_SUPPORTED;
        *currentMode = *pendingMode = t.gpu.mig_mode;
        return NVML_SUCCESS;
    });
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
    return with_device(__func__, device, [&](const Target& t) {
        if (t.mig != nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        return set_output(count, mig_enabled(t.gpu) ? kMaxMigDevices : 0u);
    });
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                               nvmlDevice_t* migDevice) {
    return with_device(__func__, device, [&](const Target& t) -> nvmlReturn_t {
        if (migDevice == nullptr || t.mig != nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        if (!mig_enabled(t.gpu) || index >= kMaxMigDevices) return NVML_ERROR_INVALID_ARGUMENT;
        if (index >= t.gpu.mig_devices.size()) return NVML_ERROR_NOT_FOUND;
        *migDevice = mig_handle(t.state, t.index, index);
        return NVML_SUCCESS;
    });
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMigDevice) {
    return with_device(__func__, device, [&](const Target& t) {
        return set_output(isMigDevice, t.mig != nullptr ? 1u : 0u);
    });
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
    return with_device(__func__, device, [&](const Target& t) {
        return t.mig == nullptr ? NVML_ERROR_INVALID_ARGUMENT : set_output(id, t.mig->gpu_instance_id);
    });
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
    return with_device(__func__, device, [&](const Target& t) {
        return t.mig == nullptr ? NVML_ERROR_INVALID_ARGUMENT : set_output(id, t.mig->compute_instance_id);
    });
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                                        nvmlDevice_t* device) {
    return with_device(__func__, migDevice, [&](const Target& t) {
        return t.mig == nullptr ? NVML_ERROR_INVALID_ARGUMENT : set_output(device, gpu_handle(t.state, t.index));
    });
}

// ---- GPM (Hopper and later; the same driver generation as MIG) ---------------------------------------

FAKE_NVML_API nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* gpmSupport) {
    return with_device(__func__, device, [&](const Target& t) {
        if (gpmSupport == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        gpmSupport->isSupportedDevice = t.gpu.gpm ? 1u : 0u;
        return NVML_SUCCESS;
    });
}

FAKE_NVML_API nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* gpmSample) {
    return with_library([&](State& s) {
        if (gpmSample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        *gpmSample = new nvmlGpmSample_st();
        s.gpm_samples.insert(*gpmSample);
        return NVML_SUCCESS;
    });
}

FAKE_NVML_API nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample) {
    return with_library([&](State& s) {
        if (s.gpm_samples.erase(gpmSample) == 0) return NVML_ERROR_INVALID_ARGUMENT;
        delete gpmSample;
        return NVML_SUCCESS;
    });
}

// nvml.h: a MIG GPU instance's counters, by the parent GPU's handle and the instance's id.
FAKE_NVML_API nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId, nvmlGpmSample_t gpmSample) {
    return with_device(__func__, device, [&](const Target& t) {
        if (t.mig != nullptr || !t.state.gpm_samples.contains(gpmSample)) return NVML_ERROR_INVALID_ARGUMENT;
        if (!t.gpu.gpm || !mig_enabled(t.gpu)) return NVML_ERROR_NOT_SUPPORTED;
        const auto it = t.runtime.gpm.find(gpuInstanceId);
        if (it == t.runtime.gpm.end()) return NVML_ERROR_NOT_FOUND;
        const double now = monotonic_s();
        *gpmSample = nvmlGpmSample_st{true, t.index, gpuInstanceId, now,
                                      it->second.active_s + it->second.percent / 100.0 * (now - it->second.since_s)};
        return NVML_SUCCESS;
    });
}

// nvml.h: the metrics between two samples of the same GPU (instance); only GRAPHICS_UTIL is implemented,
// the other metrics answer NOT_SUPPORTED in their own nvmlReturn.
FAKE_NVML_API nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* metricsGet) {
    return with_library([&](State& s) {
        if (metricsGet == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        const nvmlGpmSample_st* a = metricsGet->sample1;
        const nvmlGpmSample_st* b = metricsGet->sample2;
        if (metricsGet->numMetrics > NVML_GPM_METRIC_MAX || !s.gpm_samples.contains(metricsGet->sample1) ||
            !s.gpm_samples.contains(metricsGet->sample2) || !a->taken || !b->taken || a->gpu != b->gpu ||
            a->gpu_instance != b->gpu_instance || b->time_s <= a->time_s) {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        for (unsigned i = 0; i < metricsGet->numMetrics; ++i) {
            nvmlGpmMetric_t& m = metricsGet->metrics[i];
            m.metricInfo = {nullptr, nullptr, nullptr};
            m.nvmlReturn = m.metricId == NVML_GPM_METRIC_GRAPHICS_UTIL ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
            m.value = m.nvmlReturn == NVML_SUCCESS ? 100.0 * (b->active_s - a->active_s) / (b->time_s - a->time_s) : 0.0;
        }
        return NVML_SUCCESS;
    });
}
#endif
