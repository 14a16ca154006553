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
            const std::string origin = zone.origin;
            const double ceiling = ceiling_watts(zone.info.kind);
            states_.push_back(State{std::move(zone), ZoneTotal(origin, ceiling)});
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
        ZoneTotal total;
        uint64_t last_raw = 0;  // last counter value (µJ) or last power (µW)
        uint64_t last_read_ns = 0;
        bool have_last = false;
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
        s.total.publish_invalid(0, sample);
        return;
    }
    s.warned = false;
    const uint64_t last_raw = s.last_raw, elapsed = now - s.last_read_ns;
    const bool baseline = !s.have_last;  // first reading (or first after a failure): not yet a delta
    s.last_raw = *value;
    s.last_read_ns = now;
    s.have_last = true;
    if (baseline) {
        s.total.publish_invalid(0, sample);
        return;
    }
    if (integrate_power) {
        // µW × s = µJ; trapezoid between the two readings, both taken by this loop.
        const double average_uw = (static_cast<double>(last_raw) + static_cast<double>(*value)) / 2.0;
        s.total.publish_step(average_uw * static_cast<double>(elapsed) / 1e9, elapsed,
                             KEPLERSHM_ZONE_INTEGRATED, sample);
        return;
    }
    const EnergyStep step = energy_step(last_raw, *value, s.zone.info.max_energy_range_uj);
    if (!step.valid) {
        log_warn("energy zone {}: counter went from {} to {} µJ and its range is unknown; interval invalid", s.zone.origin,
                 last_raw, *value);
        s.total.publish_invalid(0, sample);
        return;
    }
    s.total.publish_step(static_cast<double>(step.delta_uj), elapsed, step.wrapped ? uint32_t{KEPLERSHM_ZONE_WRAPPED} : 0u, sample);
}

}  // namespace

std::unique_ptr<EnergySource> make_sysfs_source(std::vector<MeterZone> zones) {
    return std::make_unique<SysfsSource>(std::move(zones));
}

}  // namespace kepler::collect
