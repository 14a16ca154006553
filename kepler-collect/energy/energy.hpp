// energy.hpp — node energy meters: the sources of zones (energy_source.hpp) the collector reads once per
// interval — RAPL powercap zones and hwmon meters (ACPI power meters, PSUs, GPUs) discovered under a sysfs
// root (--sysfs-root, /sys by default), and remote meters such as a BMC (redfish/).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "energy/energy_source.hpp"
#include "energy/gpu/gpu_source.hpp"
#include "keplershm.h"

namespace kepler::collect {

/// A zone as discovered: its header entry and where to read it.
struct MeterZone {
    keplershm_zone_info info{};
    std::string energy_path;  // cumulative µJ: RAPL energy_uj or hwmon energyN_input
    std::string power_path;   // hwmon powerN_input/powerN_average in µW, integrated when no energy file
    std::string origin;       // "intel-rapl:0", "hwmon2/power1" (for messages)
};

/// Discovery results: zones to publish, and why some were left out.
struct Discovery {
    std::vector<MeterZone> zones;
    std::vector<std::string> problems;  // unreadable counters etc. — each one line, naming the file
    std::vector<std::string> notes;     // mirrored zones skipped and similar decisions
};

/// Powercap RAPL zones under <sysfs_root>/class/powercap (packages, core/uncore/dram/psys subzones).
/// Mirrors are skipped: zones with the same name (intel-rapl-mmio repeats intel-rapl), and per-die
/// package zones of one package whose counters read the same (multi-die AMD parts mirror one
/// socket-wide counter on every die).
void discover_rapl(const std::string& sysfs_root, Discovery& out);

/// hwmon power meters under <sysfs_root>/class/hwmon: ACPI power_meter and PSU inputs (PLATFORM), others
/// (OTHER: published, in no total). A PSU's output channels are not zones; GPU drivers' meters are read
/// with their DRM card (make_drm_source).
void discover_hwmon(const std::string& sysfs_root, Discovery& out);

/// The discovered sysfs zones as one source, read in place each interval (wrap-corrected counters,
/// power integrated between reads).
[[nodiscard]] std::unique_ptr<EnergySource> make_sysfs_source(std::vector<MeterZone> zones);

/// Every source's zones, in one zone_index order, read each interval. Not thread-safe.
class EnergyMeter {
public:
    /// Discovers the sysfs zones (at most KEPLERSHM_MAX_ZONES) and takes the first reading of each.
    static EnergyMeter discover(const std::string& sysfs_root);
    /// Adds a source's zones after those already there (as many as the segment holds; the rest are
    /// named in notes()). Before the writer exists: zones belong to the header.
    void add_source(std::unique_ptr<EnergySource> source);
    /// Adds a GPU source: its zones as add_source() does, its devices and their users in every frame.
    void add_gpu_source(std::unique_ptr<GpuSource> source);
    /// GPU device records each frame holds (the writer's gpu_device_capacity).
    [[nodiscard]] size_t gpu_device_count() const noexcept;
    /// Whether a GPU source of this kind ("nvml", "drm": EnergySource::describe()) is in the meter.
    [[nodiscard]] bool has_gpu_source(std::string_view kind) const;
    /// Whether a GPU source found a device it does not publish (GpuSource::new_devices()).
    [[nodiscard]] bool gpu_sources_have_new_devices();

    /// Header entries, in zone_index order (WriterOptions.zones).
    [[nodiscard]] std::vector<keplershm_zone_info> zone_infos() const;
    /// enum keplershm_power_source for the frame: RAPL, else ACPI, else Redfish, else PMBus, else hwmon,
    /// else NONE (the CPU's own meter first: it is what the models split).
    [[nodiscard]] uint32_t power_source() const noexcept;
    /// The BMC's id when a zone comes from one (header.platform_meter_id), else "".
    [[nodiscard]] const std::string& platform_meter_id() const noexcept { return platform_meter_id_; }
    void set_platform_meter_id(std::string id) { platform_meter_id_ = std::move(id); }
    [[nodiscard]] const std::vector<std::string>& problems() const noexcept { return problems_; }
    [[nodiscard]] const std::vector<std::string>& notes() const noexcept { return notes_; }
    [[nodiscard]] bool empty() const noexcept { return zone_count_ == 0; }

    /// One sample per zone for the interval ending at `frame_end_ns` (EnergySource::read); a failed or
    /// stale read gives a sample without KEPLERSHM_ZONE_VALID.
    std::vector<keplershm_zone_sample> read(uint64_t frame_end_ns);
    /// read() for an interval that ends now.
    std::vector<keplershm_zone_sample> read();
    /// The GPU devices' state and users for the interval ending at `frame_end_ns`, after read(): zone
    /// indexes, parents and devices in the frame's numbering (a device whose zone did not fit has none).
    void read_gpus(std::vector<keplershm_gpu_device>& devices, std::vector<GpuProcessUse>& uses, uint64_t frame_end_ns);

private:
    struct Source {
        std::unique_ptr<EnergySource> source;
        size_t zones = 0;                // how many of its zones the segment holds (its first ones)
        std::vector<std::string> names;  // their names in the header, unique across the meter
    };
    /// `wanted`, or when another zone (or one of `also_taken`) has it already, the first free
    /// "<stem>-<n>": GPU zones of two vendors both count from gpu-0.
    [[nodiscard]] std::string unique_zone_name(const std::string& wanted, const std::vector<std::string>& also_taken) const;
    struct Gpus {
        GpuSource* source = nullptr;  // owned by sources_
        uint32_t first_zone = 0;      // its zones' place in the segment
        uint32_t zones = 0;           // how many of them the segment holds
    };
    std::vector<Source> sources_;
    std::vector<Gpus> gpus_;
    std::vector<GpuProcessUse> gpu_scratch_;
    size_t zone_count_ = 0;
    std::string platform_meter_id_;
    std::vector<std::string> problems_;
    std::vector<std::string> notes_;
};

}  // namespace kepler::collect
