// energy.hpp — node energy meters: RAPL powercap zones and hwmon/ACPI power meters, discovered under
// a sysfs root (--sysfs-root, /sys by default) and read once per interval in the collector loop.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "keplershm.h"

namespace kepler::collect {

/// One step of a cumulative energy counter.
struct EnergyStep {
    uint64_t delta_uj = 0;
    bool wrapped = false;
    bool valid = true;  // false: the counter went backwards and its range is unknown, delta unknown
};

/// RAPL counters wrap at max_energy_range_uj: a smaller reading means one wrap (a 1 s interval is far
/// shorter than the minutes a wrap takes at full power). Without a known range the step is invalid —
/// reusing the previous delta, as Kepler 0.7 did, would invent energy.
[[nodiscard]] EnergyStep energy_step(uint64_t previous_uj, uint64_t current_uj, uint64_t max_range_uj) noexcept;

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

/// hwmon power meters under <sysfs_root>/class/hwmon: ACPI power_meter (PLATFORM), others (OTHER).
void discover_hwmon(const std::string& sysfs_root, Discovery& out);

/// Reads every discovered zone each interval and keeps wrap-corrected 64-bit totals. Not thread-safe.
class EnergyMeter {
public:
    /// Discovers zones (at most KEPLERSHM_MAX_ZONES) and takes the first reading of each.
    static EnergyMeter discover(const std::string& sysfs_root);

    /// Header entries, in zone_index order (WriterOptions.zones).
    [[nodiscard]] std::vector<keplershm_zone_info> zone_infos() const;
    /// enum keplershm_power_source for the frame: RAPL, else ACPI, else HWMON, else NONE.
    [[nodiscard]] uint32_t power_source() const noexcept;
    [[nodiscard]] const std::vector<std::string>& problems() const noexcept { return problems_; }
    [[nodiscard]] const std::vector<std::string>& notes() const noexcept { return notes_; }
    [[nodiscard]] bool empty() const noexcept { return zones_.empty(); }

    /// One sample per zone, read now; a failed read gives a sample without KEPLERSHM_ZONE_VALID.
    std::vector<keplershm_zone_sample> read();

private:
    struct State {
        MeterZone zone;
        uint64_t last_raw = 0;       // last counter value (µJ) or last power (µW)
        uint64_t last_read_ns = 0;
        bool have_last = false;
        uint64_t total_uj = 0;
        bool warned = false;
    };
    void read_zone(State& s, keplershm_zone_sample& sample);

    std::vector<State> zones_;
    std::vector<std::string> problems_;
    std::vector<std::string> notes_;
};

}  // namespace kepler::collect
