// gpu_source.hpp — GPUs as energy sources: each GPU is a zone of kind GPU (its energy), and the source also
// knows its devices (frame section GPU_DEVICES) and which processes used each one in the interval
// (GPU_USAGE). NVIDIA GPUs are read through NVML (nvml_source.cpp), AMD and Intel GPUs through the kernel
// (drm_source.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "energy/energy_source.hpp"
#include "keplershm.h"

namespace kepler::collect {

/// One process's use of one device in an interval, before the frame resolves the process.
struct GpuProcessUse {
    uint32_t pid = 0;
    uint32_t device = 0;  // index into the source's devices()
    uint64_t busy_ns = 0;
    uint64_t memory_bytes = 0;
    uint32_t flags = 0;   // enum keplershm_gpu_usage_flag
};

/// A source of GPU zones that also lists its devices and their users.
class GpuSource : public EnergySource {
public:
    /// The devices as the frame publishes them (facts fixed at discovery; flags, memory and active time of
    /// the last read_usage()). zone_index counts within this source's zones(); parent within devices().
    [[nodiscard]] virtual const std::vector<keplershm_gpu_device>& devices() const noexcept = 0;
    /// Who used each device since the previous call, for the interval that ends at `frame_end_ns`
    /// (CLOCK_MONOTONIC); refreshes the devices' per-interval state. Called once per frame, after read().
    virtual void read_usage(std::vector<GpuProcessUse>& out, uint64_t frame_end_ns) = 0;
    /// Whether a device appeared that discovery did not see (a GPU added, a new MIG layout): the segment's
    /// devices are fixed, so the collector discovers its meters again in a new generation. Devices that
    /// went away are not asked about: they stay, LOST or without users.
    [[nodiscard]] virtual bool new_devices() = 0;
};

struct NvmlSettings {
    std::string library = "libnvidia-ml.so.1";  // a path, or a name the dynamic loader searches
    // dcgm-exporter's metrics, read for MIG instances' activity where the GPU has no GPM; "" none.
    std::string dcgm_endpoint;
    std::chrono::milliseconds dcgm_refresh{2000};
};

struct DrmSettings {
    std::string sysfs_root = "/sys";
    std::string proc_root = "/proc";
    // Descriptors looked at (readlink) per frame, over all processes: a process's list of DRM descriptors
    // is refreshed at most every 5 s and as this allows, processes never scanned first. Any local user can
    // hold tens of thousands of descriptors; without a bound their scan stretched the frame loop.
    size_t fd_budget = 20'000;
};

/// AMD and Intel GPUs (and NVIDIA's open nouveau driver) through the kernel: DRM cards, their hwmon meters
/// and the DRM client usage stats in /proc/<pid>/fdinfo. nullptr (with `why`) when there is no such card.
[[nodiscard]] std::unique_ptr<GpuSource> make_drm_source(const DrmSettings& settings, std::string& why);

/// Whether NVML now loads and finds a GPU, or the kernel a card of make_drm_source's (for a node whose GPUs
/// were not there at start: a driver loaded later). Quiet: nothing is logged.
[[nodiscard]] bool nvml_finds_gpus(const NvmlSettings& settings);
[[nodiscard]] bool drm_finds_cards(const DrmSettings& settings);

/// NVIDIA GPUs through NVML, or nullopt (with `why` set to one line for the log) when there is no usable
/// library, driver or GPU. Never throws for a node without NVIDIA hardware.
[[nodiscard]] std::unique_ptr<GpuSource> make_nvml_source(const NvmlSettings& settings, std::string& why);

}  // namespace kepler::collect
