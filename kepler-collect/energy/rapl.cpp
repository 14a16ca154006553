// RAPL zones of the powercap framework: /sys/class/powercap/intel-rapl:N[:M] (and intel-rapl-mmio:N).
#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "common/text_io.hpp"
#include "energy/energy.hpp"
#include "keplershm/keplershm.hpp"

namespace kepler::collect {

namespace {

struct PowercapEntry {
    std::string dir_name;     // "intel-rapl:0:1"
    int interface_rank = 0;   // 0: MSR interface (intel-rapl), 1: MMIO (intel-rapl-mmio) mirrors it
    uint32_t index = 0;       // N
    int subzone = -1;         // M, or -1 for a top-level zone
};

std::optional<PowercapEntry> parse_entry_name(std::string_view name) {
    PowercapEntry e;
    e.dir_name = std::string(name);
    std::string_view rest;
    if (starts_with(name, "intel-rapl:")) {
        rest = name.substr(11);
    } else if (starts_with(name, "intel-rapl-mmio:")) {
        rest = name.substr(16);
        e.interface_rank = 1;
    } else {
        return std::nullopt;  // "intel-rapl" itself is the control type, not a zone
    }
    const size_t colon = rest.find(':');
    const auto index = parse_u64(rest.substr(0, colon));
    if (!index || *index > 4096) return std::nullopt;
    e.index = static_cast<uint32_t>(*index);
    if (colon != std::string_view::npos) {
        const auto sub = parse_u64(rest.substr(colon + 1));
        if (!sub || *sub > 4096) return std::nullopt;
        e.subzone = static_cast<int>(*sub);
    }
    return e;
}

/// "package-1" → 1, "package-0-die-1" → 0.
std::optional<uint32_t> package_socket(std::string_view name) {
    if (!starts_with(name, "package-")) return std::nullopt;
    std::string_view digits = name.substr(8);
    digits = digits.substr(0, digits.find('-'));
    const auto n = parse_u64(digits);
    if (!n || *n > 4096) return std::nullopt;
    return static_cast<uint32_t>(*n);
}

uint32_t kind_of(std::string_view name, bool top_level) {
    if (top_level && starts_with(name, "package-")) return KEPLERSHM_ZONE_PACKAGE;
    if (name == "psys") return KEPLERSHM_ZONE_PSYS;
    if (name == "dram") return KEPLERSHM_ZONE_DRAM;
    if (!top_level && name == "core") return KEPLERSHM_ZONE_CORE;
    if (!top_level && name == "uncore") return KEPLERSHM_ZONE_UNCORE;
    return KEPLERSHM_ZONE_OTHER;
}

std::string explain_read_error(const ReadResult& r) {
    if (r.error == EACCES || r.error == EPERM) {
        return r.message + " (energy_uj is readable by root only since CVE-2020-8694; run the collector as root)";
    }
    return r.message;
}

/// Two counters are one meter when they read the same, twice (per-die mirrors of a socket counter).
bool counters_match(const std::string& a, const std::string& b) {
    constexpr uint64_t kToleranceUj = 10'000;  // one counter update at high power, far below any real divergence
    for (int probe = 0; probe < 2; ++probe) {
        const auto va = parse_u64(read_text_file(a, 64).text);
        const auto vb = parse_u64(read_text_file(b, 64).text);
        if (!va || !vb) return false;
        if ((*va > *vb ? *va - *vb : *vb - *va) > kToleranceUj) return false;
    }
    return true;
}

std::vector<PowercapEntry> list_entries(const std::string& base) {
    std::vector<PowercapEntry> entries;
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(base.c_str()), closedir);
    if (!dir) return entries;  // no powercap at all: a VM, or RAPL not supported
    while (const dirent* d = readdir(dir.get())) {
        if (auto e = parse_entry_name(d->d_name)) entries.push_back(std::move(*e));
    }
    // Each zone right before its subzones (a subzone inherits its parent's socket), MSR before MMIO.
    std::sort(entries.begin(), entries.end(), [](const PowercapEntry& x, const PowercapEntry& y) {
        return std::tuple(x.interface_rank, x.index, x.subzone) < std::tuple(y.interface_rank, y.index, y.subzone);
    });
    return entries;
}

/// A zone's name and energy counter, both readable; else why not, in `out.problems`.
std::optional<std::string> readable_zone_name(const PowercapEntry& e, const std::string& dir,
                                              const std::string& energy_path, Discovery& out) {
    const ReadResult name_file = read_text_file(dir + "/name", 64);
    std::string name(trim(name_file.text));
    if (!name_file.ok() || name.empty()) {
        out.problems.push_back(fmt::format("RAPL zone {}: {}", e.dir_name, name_file.ok() ? "empty name" : name_file.message));
        return std::nullopt;
    }
    const ReadResult energy = read_text_file(energy_path, 64);
    if (!energy.ok() || !parse_u64(energy.text)) {
        out.problems.push_back(fmt::format("RAPL zone {} ({}): {}", e.dir_name, name,
                                           energy.ok() ? fmt::format("{} does not hold a number", energy_path)
                                                       : explain_read_error(energy)));
        return std::nullopt;
    }
    return name;
}

/// The published zone's header fields, with its counter's wrap range when sysfs gives a usable one.
MeterZone make_zone(const PowercapEntry& e, const std::string& dir, const std::string& energy_path,
                    const std::string& zone_name, uint32_t kind, uint32_t socket, Discovery& out) {
    MeterZone zone;
    zone.origin = e.dir_name;
    zone.energy_path = energy_path;
    zone.info.kind = kind;
    zone.info.socket = socket;
    zone.info.power_source = KEPLERSHM_POWER_RAPL;
    keplershm::set_text(zone.info.name, zone_name);
    const ReadResult range = read_text_file(dir + "/max_energy_range_uj", 64);
    if (const auto max = range.ok() ? parse_u64(range.text) : std::nullopt; max && *max > 0) {
        zone.info.max_energy_range_uj = *max;
    } else {
        out.notes.push_back(fmt::format("RAPL zone {} ({}): no usable max_energy_range_uj, so a wrap cannot be "
                                        "corrected (such an interval is published as invalid)", e.dir_name, zone_name));
    }
    return zone;
}

}  // namespace

void discover_rapl(const std::string& sysfs_root, Discovery& out) {
    const std::string base = sysfs_root + "/class/powercap";
    std::set<std::string> names_taken;
    std::map<std::pair<int, uint32_t>, std::optional<uint32_t>> parent_socket;  // (rank, N) → socket, nullopt: skipped
    std::map<uint32_t, std::string> first_die_of_package;                       // socket → energy path

    for (const PowercapEntry& e : list_entries(base)) {
        const std::string dir = base + "/" + e.dir_name;
        const bool top = e.subzone < 0;
        std::optional<uint32_t>* parent = nullptr;  // a top zone's entry: its subzones' socket, or skipped
        if (top) {
            parent = &parent_socket[{e.interface_rank, e.index}];
            *parent = std::nullopt;  // until the zone is taken
        } else if (const auto p = parent_socket.find({e.interface_rank, e.index}); p == parent_socket.end() || !p->second) {
            continue;  // parent skipped: so is its subzone
        }
        const std::string energy_path = dir + "/energy_uj";
        const std::optional<std::string> name = readable_zone_name(e, dir, energy_path, out);
        if (!name) continue;
        const uint32_t socket = top ? package_socket(*name).value_or(0) : *parent_socket[{e.interface_rank, e.index}];
        const std::string zone_name = top ? *name : fmt::format("{}-{}", *name, socket);
        if (!names_taken.insert(zone_name).second) {
            out.notes.push_back(fmt::format("RAPL zone {} ({}) skipped: it mirrors the zone of the same name", e.dir_name, zone_name));
            continue;
        }
        const uint32_t kind = kind_of(*name, top);
        if (kind == KEPLERSHM_ZONE_PACKAGE && name->find("-die-") != std::string::npos) {
            const auto [first, inserted] = first_die_of_package.try_emplace(socket, energy_path);
            if (!inserted && counters_match(first->second, energy_path)) {
                out.notes.push_back(fmt::format("RAPL zone {} ({}) skipped: its counter mirrors another die of package {}",
                                                e.dir_name, *name, socket));
                continue;
            }
        }
        if (top) *parent = socket;
        out.zones.push_back(make_zone(e, dir, energy_path, zone_name, kind, socket, out));
    }
}

}  // namespace kepler::collect
