// Every energy source's zones in one index order: what the header lists and each frame samples.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "common/text_io.hpp"
#include "energy/energy.hpp"
#include "keplershm/keplershm.hpp"

namespace kepler::collect {

EnergyMeter EnergyMeter::discover(const std::string& sysfs_root) {
    Discovery found;
    discover_rapl(sysfs_root, found);
    discover_hwmon(sysfs_root, found);

    EnergyMeter meter;
    meter.problems_ = std::move(found.problems);
    meter.notes_ = std::move(found.notes);
    if (!found.zones.empty()) meter.add_source(make_sysfs_source(std::move(found.zones)));
    return meter;
}

void EnergyMeter::add_source(std::unique_ptr<EnergySource> source) {
    const std::vector<keplershm_zone_info>& zones = source->zones();
    const size_t room = KEPLERSHM_MAX_ZONES - zone_count_;
    const size_t taken = std::min(room, zones.size());
    for (size_t i = taken; i < zones.size(); ++i) {
        notes_.push_back(fmt::format("zone {} of {} left out: a segment holds at most {} zones",
                                     keplershm::get_text(zones[i].name), source->describe(), KEPLERSHM_MAX_ZONES));
    }
    if (taken == 0 && !zones.empty()) return;  // no room for any of its zones (a zone-less GPU source still counts use)
    std::vector<std::string> names;
    for (size_t i = 0; i < taken; ++i) {
        const std::string wanted(keplershm::get_text(zones[i].name));
        names.push_back(unique_zone_name(wanted, names));
        if (names.back() != wanted) {
            notes_.push_back(fmt::format("zone {} of {} is named {} in the segment: another meter's zone has its name",
                                         wanted, source->describe(), names.back()));
        }
    }
    zone_count_ += taken;
    sources_.push_back(Source{std::move(source), taken, std::move(names)});
    // The first reading is the baseline of every zone's first interval.
    std::vector<keplershm_zone_sample> baseline(sources_.back().source->zones().size());
    sources_.back().source->read(baseline, monotonic_now_ns());
}

void EnergyMeter::add_gpu_source(std::unique_ptr<GpuSource> source) {
    GpuSource* gpu = source.get();
    const size_t before = zone_count_;
    const bool metered = !source->zones().empty();
    add_source(std::move(source));
    // Dropped when none of its zones fitted; kept without zones when it has none (an iGPU without a
    // meter: its use is published, and a rescan knows the card, so it makes no new generation).
    if (metered && zone_count_ == before) return;
    gpus_.push_back(Gpus{gpu, static_cast<uint32_t>(before), static_cast<uint32_t>(zone_count_ - before)});
}

size_t EnergyMeter::gpu_device_count() const noexcept {
    size_t n = 0;
    for (const Gpus& g : gpus_) n += g.source->devices().size();
    return n;
}

void EnergyMeter::read_gpus(std::vector<keplershm_gpu_device>& devices, std::vector<GpuProcessUse>& uses,
                            uint64_t frame_end_ns) {
    constexpr uint32_t kNone = 0xffffffffu;
    devices.clear();
    uses.clear();
    for (const Gpus& g : gpus_) {
        const auto first_device = static_cast<uint32_t>(devices.size());
        g.source->read_usage(gpu_scratch_, frame_end_ns);
        for (keplershm_gpu_device d : g.source->devices()) {
            d.zone_index = d.zone_index < g.zones ? g.first_zone + d.zone_index : kNone;
            if (d.parent != kNone) d.parent += first_device;
            devices.push_back(d);
        }
        for (GpuProcessUse use : gpu_scratch_) {
            use.device += first_device;
            uses.push_back(use);
        }
    }
}

std::string EnergyMeter::unique_zone_name(const std::string& wanted, const std::vector<std::string>& also_taken) const {
    auto in = [](const std::vector<std::string>& names, const std::string& name) {
        return std::find(names.begin(), names.end(), name) != names.end();
    };
    auto taken = [&](const std::string& name) {
        return in(also_taken, name) || std::any_of(sources_.begin(), sources_.end(), [&](const Source& s) { return in(s.names, name); });
    };
    if (!taken(wanted)) return wanted;
    // "gpu-0" counts on as "gpu-<n>"; a name without a number gets one.
    const size_t dash = wanted.find_last_of('-');
    const bool numbered = dash != std::string::npos && dash + 1 < wanted.size() &&
                          wanted.find_first_not_of("0123456789", dash + 1) == std::string::npos;
    const std::string stem = numbered ? wanted.substr(0, dash) : wanted;
    for (size_t n = numbered ? 0 : 2;; ++n) {
        std::string candidate = fmt::format("{}-{}", stem, n);
        if (!taken(candidate)) return candidate;
    }
}

std::vector<keplershm_zone_info> EnergyMeter::zone_infos() const {
    std::vector<keplershm_zone_info> infos;
    for (const Source& s : sources_) {
        const auto& zones = s.source->zones();
        for (size_t z = 0; z < s.zones; ++z) {
            infos.push_back(zones[z]);
            keplershm::set_text(infos.back().name, s.names[z]);
        }
    }
    return infos;
}

uint32_t EnergyMeter::power_source() const noexcept {
    constexpr std::array kPreference{KEPLERSHM_POWER_RAPL, KEPLERSHM_POWER_ACPI, KEPLERSHM_POWER_REDFISH,
                                     KEPLERSHM_POWER_PMBUS, KEPLERSHM_POWER_HWMON};
    auto rank_of = [&](uint32_t power_source) {
        const auto* at = std::find(kPreference.begin(), kPreference.end(), static_cast<keplershm_power_source>(power_source));
        return static_cast<size_t>(at - kPreference.begin());  // size(): not in the list
    };
    size_t best = kPreference.size();
    for (const Source& s : sources_) {
        for (size_t z = 0; z < s.zones; ++z) best = std::min(best, rank_of(s.source->zones()[z].power_source));
    }
    return best < kPreference.size() ? static_cast<uint32_t>(kPreference[best]) : uint32_t{KEPLERSHM_POWER_NONE};
}

std::vector<keplershm_zone_sample> EnergyMeter::read() { return read(monotonic_now_ns()); }

std::vector<keplershm_zone_sample> EnergyMeter::read(uint64_t frame_end_ns) {
    std::vector<keplershm_zone_sample> samples;
    samples.reserve(zone_count_);
    std::vector<keplershm_zone_sample> scratch;
    for (Source& s : sources_) {
        scratch.assign(s.source->zones().size(), keplershm_zone_sample{});
        s.source->read(scratch, frame_end_ns);
        samples.insert(samples.end(), scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(s.zones));
    }
    for (size_t i = 0; i < samples.size(); ++i) samples[i].zone_index = static_cast<uint32_t>(i);
    return samples;
}

bool EnergyMeter::has_gpu_source(std::string_view kind) const {
    return std::any_of(gpus_.begin(), gpus_.end(), [&](const Gpus& g) { return g.source->describe() == kind; });
}

bool EnergyMeter::gpu_sources_have_new_devices() {
    return std::any_of(gpus_.begin(), gpus_.end(), [](const Gpus& g) { return g.source->new_devices(); });
}

}  // namespace kepler::collect
