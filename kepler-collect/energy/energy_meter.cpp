#include <fmt/format.h>

#include "support/log/log.hpp"
#include "common/text_io.hpp"
#include "energy/energy.hpp"

namespace kepler::collect {

EnergyStep energy_step(uint64_t previous_uj, uint64_t current_uj, uint64_t max_range_uj) noexcept {
    if (current_uj >= previous_uj) return {current_uj - previous_uj, false, true};
    if (max_range_uj == 0 || previous_uj > max_range_uj) return {0, true, false};
    // The counter ran from previous up to the top of its range, restarted at 0 and reached current.
    return {(max_range_uj - previous_uj) + current_uj, true, true};
}

EnergyMeter EnergyMeter::discover(const std::string& sysfs_root) {
    Discovery found;
    discover_rapl(sysfs_root, found);
    discover_hwmon(sysfs_root, found);

    EnergyMeter meter;
    meter.problems_ = std::move(found.problems);
    meter.notes_ = std::move(found.notes);
    for (MeterZone& zone : found.zones) {
        if (meter.zones_.size() == KEPLERSHM_MAX_ZONES) {
            meter.notes_.push_back(fmt::format("zone {} left out: a segment holds at most {} zones", zone.origin,
                                               KEPLERSHM_MAX_ZONES));
            continue;
        }
        State s;
        s.zone = std::move(zone);
        meter.zones_.push_back(std::move(s));
    }
    meter.read();  // first reading: the baseline of every zone's first interval
    return meter;
}

std::vector<keplershm_zone_info> EnergyMeter::zone_infos() const {
    std::vector<keplershm_zone_info> infos;
    for (const State& s : zones_) infos.push_back(s.zone.info);
    return infos;
}

uint32_t EnergyMeter::power_source() const noexcept {
    uint32_t best = KEPLERSHM_POWER_NONE;
    for (const State& s : zones_) {
        const uint32_t p = s.zone.info.power_source;
        if (p == KEPLERSHM_POWER_RAPL) return p;
        if (p == KEPLERSHM_POWER_ACPI || best == KEPLERSHM_POWER_NONE) best = p;
    }
    return best;
}

std::vector<keplershm_zone_sample> EnergyMeter::read() {
    std::vector<keplershm_zone_sample> samples(zones_.size());
    for (size_t i = 0; i < zones_.size(); ++i) {
        samples[i].zone_index = static_cast<uint32_t>(i);
        read_zone(zones_[i], samples[i]);
    }
    return samples;
}

void EnergyMeter::read_zone(State& s, keplershm_zone_sample& sample) {
    const bool integrate_power = s.zone.energy_path.empty();
    const std::string& path = integrate_power ? s.zone.power_path : s.zone.energy_path;
    const ReadResult r = read_text_file(path, 64);
    const uint64_t now = monotonic_now_ns();
    sample.read_time_ns = now;
    const auto value = r.ok() ? parse_u64(r.text) : std::nullopt;
    if (!value) {
        if (!s.warned) {
            log_warn("energy zone {}: {}", s.zone.origin, r.ok() ? path + " does not hold a number" : r.message);
            s.warned = true;
        }
        s.have_last = false;  // the energy of the gap is unknown: restart from the next good reading
        sample.energy_total_uj = s.total_uj;
        return;
    }
    s.warned = false;
    if (!s.have_last) {  // first reading (or first after a failure): a baseline, not yet a delta
        s.last_raw = *value;
        s.last_read_ns = now;
        s.have_last = true;
        sample.energy_total_uj = s.total_uj;
        return;
    }
    if (integrate_power) {
        // µW × s = µJ; trapezoid between the two readings.
        const double seconds = static_cast<double>(now - s.last_read_ns) / 1e9;
        const double average_uw = (static_cast<double>(s.last_raw) + static_cast<double>(*value)) / 2.0;
        sample.energy_delta_uj = static_cast<uint64_t>(average_uw * seconds);
        sample.flags = KEPLERSHM_ZONE_VALID;
    } else {
        const EnergyStep step = energy_step(s.last_raw, *value, s.zone.info.max_energy_range_uj);
        if (step.valid) {
            sample.energy_delta_uj = step.delta_uj;
            sample.flags = KEPLERSHM_ZONE_VALID | (step.wrapped ? uint32_t{KEPLERSHM_ZONE_WRAPPED} : 0u);
        } else {
            log_warn("energy zone {}: counter went from {} to {} µJ and its range is unknown; interval invalid",
                     s.zone.origin, s.last_raw, *value);
        }
    }
    s.total_uj += sample.energy_delta_uj;
    sample.energy_total_uj = s.total_uj;
    s.last_raw = *value;
    s.last_read_ns = now;
}

}  // namespace kepler::collect
