// hwmon power meters: /sys/class/hwmon/hwmonN/{name, energyK_input (µJ), powerK_input|powerK_average (µW)}.
// ACPI power meters (driver power_meter) measure the whole platform; so does a power supply's input
// (PMBus: the channel labelled "pin"; its "pout" channels are the same energy after conversion, never a
// second zone). Older kernels keep the files under hwmonN/device/.
#include <algorithm>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "common/text_io.hpp"
#include "energy/energy.hpp"
#include "keplershm/keplershm.hpp"

namespace kepler::collect {

namespace {

/// "power2_average" → {"power", 2, "average"}; nullopt for other files.
struct ChannelFile {
    std::string type;
    uint32_t channel = 0;
    std::string item;
};
std::optional<ChannelFile> parse_channel_file(std::string_view file) {
    for (std::string_view type : {"energy", "power"}) {
        if (!starts_with(file, type)) continue;
        const std::string_view rest = file.substr(type.size());
        const size_t underscore = rest.find('_');
        if (underscore == std::string_view::npos) return std::nullopt;
        const auto n = parse_u64(rest.substr(0, underscore));
        if (!n || *n > 1024) return std::nullopt;
        return ChannelFile{std::string(type), static_cast<uint32_t>(*n), std::string(rest.substr(underscore + 1))};
    }
    return std::nullopt;
}

/// hwmon names of power-supply drivers (the PMBus core's generic driver and the PSU-specific ones).
bool is_power_supply(std::string_view name) {
    for (std::string_view psu : {"pmbus", "ibm_cffps", "dps920ab", "fsp3y", "bpa_rs600", "inspur_ipsps1", "pfe3000",
                                 "acbel_fsg032", "crps"}) {
        if (name == psu) return true;
    }
    return false;
}

uint32_t kind_of_device(std::string_view name) {
    if (name == "power_meter" || is_power_supply(name)) return KEPLERSHM_ZONE_PLATFORM;
    if (name == "amdgpu" || name == "nouveau" || name == "i915" || name == "xe") return KEPLERSHM_ZONE_GPU;
    return KEPLERSHM_ZONE_OTHER;
}

uint32_t power_source_of_device(std::string_view name) {
    if (name == "power_meter") return KEPLERSHM_POWER_ACPI;
    if (is_power_supply(name)) return KEPLERSHM_POWER_PMBUS;
    return KEPLERSHM_POWER_HWMON;
}

uint32_t meter_detail_of_device(std::string_view name) {
    if (name == "power_meter") return KEPLERSHM_METER_POWER_METER;
    if (is_power_supply(name)) return KEPLERSHM_METER_POWER_SUPPLY;
    return KEPLERSHM_METER_DETAIL_NONE;
}

/// A PSU's input is channel "pin" (PMBus labels), or channel 1 when unlabelled (the PMBus core's order).
bool is_power_supply_input(uint32_t channel, const std::string& label) {
    return label.empty() ? channel == 1 : label == "pin";
}

struct Channel {
    std::string energy;   // energyK_input
    std::string power;    // powerK_input, else powerK_average
    std::string label;
};

/// ACPI meters average over an interval of their own (powerK_average_interval, ms): said once, since a
/// reading then lags the load by up to that long.
void note_averaging_interval(const std::string& dir, uint32_t channel, const std::string& origin, Discovery& out) {
    const ReadResult interval = read_text_file(fmt::format("{}/power{}_average_interval", dir, channel), 64);
    const auto ms = interval.ok() ? parse_u64(interval.text) : std::nullopt;
    if (ms) out.notes.push_back(fmt::format("{}: the ACPI power meter averages over {} ms", origin, *ms));
}

}  // namespace

void discover_hwmon(const std::string& sysfs_root, Discovery& out) {
    const std::string base = sysfs_root + "/class/hwmon";
    for (const std::string& device : list_directory(base)) {
        if (!starts_with(device, "hwmon")) continue;
        for (const std::string& dir : {base + "/" + device, base + "/" + device + "/device"}) {
            const ReadResult name_file = read_text_file(dir + "/name", 64);
            if (!name_file.ok()) continue;
            const std::string name(trim(name_file.text));
            if (kind_of_device(name) == KEPLERSHM_ZONE_GPU) {
                out.notes.push_back(fmt::format("{} ({}): a GPU's meter, read with its DRM card (--gpu)", device, name));
                break;
            }
            std::map<uint32_t, Channel> channels;
            for (const std::string& file : list_directory(dir)) {
                const auto c = parse_channel_file(file);
                if (!c) continue;
                Channel& ch = channels[c->channel];
                const std::string path = dir + "/" + file;
                if (c->type == "energy" && c->item == "input") ch.energy = path;
                if (c->type == "power" && c->item == "input") ch.power = path;
                if (c->type == "power" && c->item == "average" && ch.power.empty()) ch.power = path;
                if (c->item == "label") ch.label = std::string(trim(read_text_file(path, 64).text));
            }
            for (const auto& [index, ch] : channels) {
                if (ch.energy.empty() && ch.power.empty()) continue;
                if (is_power_supply(name) && !is_power_supply_input(index, ch.label)) {
                    out.notes.push_back(fmt::format("{} ({}) channel {}{}: a power supply's output, inside its input: "
                                                    "not a zone", device, name, index, ch.label.empty() ? "" : " " + ch.label));
                    continue;
                }
                MeterZone zone;
                zone.energy_path = ch.energy;
                zone.power_path = ch.energy.empty() ? ch.power : std::string();
                const std::string& probe = ch.energy.empty() ? ch.power : ch.energy;
                zone.origin = fmt::format("{}/{}", device, probe.substr(probe.rfind('/') + 1));
                const ReadResult value = read_text_file(probe, 64);
                if (!value.ok() || !parse_u64(value.text)) {
                    out.problems.push_back(fmt::format("hwmon meter {} ({}): {}", zone.origin, name,
                                                       value.ok() ? probe + " does not hold a number" : value.message));
                    continue;
                }
                const std::string channel_name = ch.label.empty()
                    ? fmt::format("{}{}", ch.energy.empty() ? "power" : "energy", index) : ch.label;
                keplershm::set_text(zone.info.name, fmt::format("{}-{}", name, channel_name));
                zone.info.kind = kind_of_device(name);
                zone.info.power_source = power_source_of_device(name);
                zone.info.meter_detail = meter_detail_of_device(name);
                if (name == "power_meter") note_averaging_interval(dir, index, zone.origin, out);
                out.zones.push_back(std::move(zone));
            }
            break;  // files found at hwmonN/ need no look into hwmonN/device/
        }
    }
}

}  // namespace kepler::collect
