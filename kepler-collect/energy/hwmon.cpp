// hwmon power meters: /sys/class/hwmon/hwmonN/{name, energyK_input (µJ), powerK_input|powerK_average (µW)}.
// ACPI power meters (driver power_meter) measure the whole platform; older kernels keep the files under
// hwmonN/device/.
#include <dirent.h>

#include <algorithm>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "common/text_io.hpp"
#include "energy/energy.hpp"
#include "keplershm/keplershm.hpp"

namespace kepler::collect {

namespace {

std::vector<std::string> list_dir(const std::string& path) {
    std::vector<std::string> names;
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path.c_str()), closedir);
    if (!dir) return names;
    while (const dirent* d = readdir(dir.get())) names.emplace_back(d->d_name);
    std::sort(names.begin(), names.end());
    return names;
}

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

uint32_t kind_of_device(std::string_view name) {
    if (name == "power_meter") return KEPLERSHM_ZONE_PLATFORM;
    if (name == "amdgpu" || name == "nouveau" || name == "i915" || name == "xe") return KEPLERSHM_ZONE_GPU;
    return KEPLERSHM_ZONE_OTHER;
}

struct Channel {
    std::string energy;   // energyK_input
    std::string power;    // powerK_input, else powerK_average
    std::string label;
};

}  // namespace

void discover_hwmon(const std::string& sysfs_root, Discovery& out) {
    const std::string base = sysfs_root + "/class/hwmon";
    for (const std::string& device : list_dir(base)) {
        if (!starts_with(device, "hwmon")) continue;
        for (const std::string& dir : {base + "/" + device, base + "/" + device + "/device"}) {
            const ReadResult name_file = read_text_file(dir + "/name", 64);
            if (!name_file.ok()) continue;
            const std::string name(trim(name_file.text));
            std::map<uint32_t, Channel> channels;
            for (const std::string& file : list_dir(dir)) {
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
                zone.info.power_source = name == "power_meter" ? KEPLERSHM_POWER_ACPI : KEPLERSHM_POWER_HWMON;
                out.zones.push_back(std::move(zone));
            }
            break;  // files found at hwmonN/ need no look into hwmonN/device/
        }
    }
}

}  // namespace kepler::collect
