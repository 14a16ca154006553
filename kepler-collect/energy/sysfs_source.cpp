// The sysfs zones (RAPL powercap, hwmon) as one energy source, read in place each interval: counters
// wrap-corrected, power readings integrated between two reads.
#include <fmt/format.h>

#include "common/text_io.hpp"
#include "energy/energy.hpp"
#include "support/log/log.hpp"

namespace kepler::collect {

namespace {

class SysfsSource final : public EnergySource {
public:
    explicit SysfsSource(std::vector<MeterZone> zones) {
        for (MeterZone& zone : zones) {
            infos_.push_back(zone.info);
            states_.push_back(State{std::move(zone)});
        }
    }

    std::string describe() const override { return "sysfs"; }
    const std::vector<keplershm_zone_info>& zones() const noexcept override { return infos_; }

    void read(std::span<keplershm_zone_sample> samples, uint64_t /*frame_end_ns: files are read now*/) override {
        for (size_t i = 0; i < states_.size() && i < samples.size(); ++i) read_zone(states_[i], samples[i]);
    }

private:
    struct State {
        MeterZone zone;
        uint64_t last_raw = 0;  // last counter value (µJ) or last power (µW)
        uint64_t last_read_ns = 0;
        bool have_last = false;
        uint64_t total_uj = 0;
        bool warned = false;
    };

    static void read_zone(State& s, keplershm_zone_sample& sample);

    std::vector<keplershm_zone_info> infos_;
    std::vector<State> states_;
};

void SysfsSource::read_zone(State& s, keplershm_zone_sample& sample) {
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
        // µW × s = µJ; trapezoid between the two readings, both taken by this loop.
        const double seconds = static_cast<double>(now - s.last_read_ns) / 1e9;
        const double average_uw = (static_cast<double>(s.last_raw) + static_cast<double>(*value)) / 2.0;
        sample.energy_delta_uj = static_cast<uint64_t>(average_uw * seconds);
        sample.flags = KEPLERSHM_ZONE_VALID | KEPLERSHM_ZONE_INTEGRATED;
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

}  // namespace

std::unique_ptr<EnergySource> make_sysfs_source(std::vector<MeterZone> zones) {
    return std::make_unique<SysfsSource>(std::move(zones));
}

}  // namespace kepler::collect
