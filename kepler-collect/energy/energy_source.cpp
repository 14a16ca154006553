// The energy-source layer's shared arithmetic: counter steps, held power, published totals.
#include "energy/energy_source.hpp"

#include <algorithm>
#include <cmath>

namespace kepler::collect {

EnergyStep energy_step(uint64_t previous_uj, uint64_t current_uj, uint64_t max_range_uj) noexcept {
    if (current_uj >= previous_uj) return {current_uj - previous_uj, false, true};
    if (max_range_uj == 0 || previous_uj > max_range_uj) return {0, true, false};
    // The counter ran from previous up to the top of its range, restarted at 0 and reached current.
    return {(max_range_uj - previous_uj) + current_uj, true, true};
}

void HeldPowerIntegral::add(uint64_t time_ns, double watts) noexcept {
    if (!std::isfinite(watts) || watts < 0) return;  // the caller refuses such readings with a message
    if (have_reading_) {
        if (time_ns <= last_ns_) return;
        // W × ns = nJ; / 1000 = µJ. A gap longer than max_age is not bridged: its energy is unknown.
        const uint64_t held_ns = std::min(time_ns - last_ns_, max_age_ns_);
        energy_uj_ += last_watts_ * static_cast<double>(held_ns) / 1e3;
        previous_ns_ = last_ns_;
        previous_watts_ = last_watts_;
        have_previous_ = held_ns == time_ns - last_ns_;  // after a gap, nothing before is held
    }
    have_reading_ = true;
    last_ns_ = time_ns;
    last_watts_ = watts;
}

std::optional<double> HeldPowerIntegral::total_uj(uint64_t at_ns) const noexcept {
    if (!have_reading_) return std::nullopt;
    if (at_ns < last_ns_) {
        // Between the previous reading and the newest one, the previous one was held.
        if (!have_previous_ || at_ns < previous_ns_) return energy_uj_;
        return energy_uj_ - previous_watts_ * static_cast<double>(last_ns_ - at_ns) / 1e3;
    }
    const uint64_t held_ns = std::min(at_ns - last_ns_, max_age_ns_);
    return energy_uj_ + last_watts_ * static_cast<double>(held_ns) / 1e3;
}

bool HeldPowerIntegral::stale(uint64_t now_ns) const noexcept {
    return !have_reading_ || (now_ns > last_ns_ && now_ns - last_ns_ > max_age_ns_);
}

void ZoneTotal::publish(double total_uj, uint32_t flags, keplershm_zone_sample& sample) noexcept {
    sample.energy_delta_uj = 0;
    if (!have_base_ || !std::isfinite(total_uj)) {
        // The first total of a run (or after a rebase) is where counting starts, not energy of this interval.
        have_base_ = std::isfinite(total_uj);
        base_meter_uj_ = total_uj;
        base_published_uj_ = published_uj_;
        sample.flags = 0;
        sample.energy_total_uj = published_uj_;
        return;
    }
    const double target = static_cast<double>(base_published_uj_) + (total_uj - base_meter_uj_);
    if (target > static_cast<double>(published_uj_)) {
        const auto reached = static_cast<uint64_t>(target);  // fractions carry to the next interval
        sample.energy_delta_uj = reached - published_uj_;
        published_uj_ = reached;
    }
    sample.flags = flags | KEPLERSHM_ZONE_VALID;
    sample.energy_total_uj = published_uj_;
}

void ZoneTotal::publish_invalid(uint32_t flags, keplershm_zone_sample& sample) const noexcept {
    sample.flags = flags & ~uint32_t{KEPLERSHM_ZONE_VALID};
    sample.energy_delta_uj = 0;
    sample.energy_total_uj = published_uj_;
}

}  // namespace kepler::collect
