// The energy-source layer's shared arithmetic: counter steps, held power, published totals.
#include "energy/energy_source.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "support/log/log.hpp"

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

double ceiling_watts(uint32_t zone_kind) noexcept {
    switch (zone_kind) {
        case KEPLERSHM_ZONE_PACKAGE:
        case KEPLERSHM_ZONE_CORE:
        case KEPLERSHM_ZONE_UNCORE:
        case KEPLERSHM_ZONE_DRAM: return 5'000;  // one socket's part: today's largest draw about 500 W
        case KEPLERSHM_ZONE_GPU: return 20'000;  // one device or superchip: today's largest about 2.7 kW
        default: return 1'000'000;  // a platform, wall side: a BMC may meter a whole rack (about 130 kW)
    }
}

bool within_ceiling(double delta_uj, uint64_t elapsed_ns, double ceiling_watts) noexcept {
    // W × ns / 1000 = µJ. Compared as doubles: nothing is converted before it is known to fit.
    return std::isfinite(delta_uj) && delta_uj >= 0 && delta_uj <= ceiling_watts * static_cast<double>(elapsed_ns) / 1e3;
}

bool ZoneTotal::plausible(double delta_uj, uint64_t elapsed_ns) noexcept {
    if (within_ceiling(delta_uj, elapsed_ns, ceiling_watts_)) return true;
    ++jumps_;
    if (std::has_single_bit(jumps_)) {
        log_warn("energy zone {}: a step of {:.6g} J in {:.3f} s is above the zone's {:.0f} W ceiling: a counter jump, not "
                 "energy; the interval is invalid and counting restarts from the new value ({} such jumps so far)",
                 origin_, delta_uj / 1e6, static_cast<double>(elapsed_ns) / 1e9, ceiling_watts_, jumps_);
    }
    return false;
}

void ZoneTotal::add(double delta_uj, uint32_t flags, keplershm_zone_sample& sample) noexcept {
    // delta_uj passed plausible(): at most the ceiling over the interval, far below 2^64 µJ.
    const double with_carry = delta_uj + carried_uj_;
    const auto whole = static_cast<uint64_t>(with_carry);
    carried_uj_ = with_carry - static_cast<double>(whole);
    sample.energy_delta_uj = whole;
    published_uj_ += whole;
    sample.flags = flags | KEPLERSHM_ZONE_VALID;
    sample.energy_total_uj = published_uj_;
}

void ZoneTotal::publish(double total_uj, uint64_t at_ns, uint32_t flags, keplershm_zone_sample& sample) noexcept {
    sample.energy_delta_uj = 0;
    if (have_base_) {
        const double target = static_cast<double>(base_published_uj_) + (total_uj - base_meter_uj_);
        const double behind = target - static_cast<double>(published_uj_) - carried_uj_;
        const double step = std::isfinite(behind) ? std::max(0.0, behind) : behind;  // not a number stays one
        const uint64_t elapsed = at_ns > last_at_ns_ ? at_ns - last_at_ns_ : 0;
        if (plausible(step, elapsed)) {
            last_at_ns_ = at_ns;
            add(step, flags, sample);
            return;
        }
        publish_invalid(flags, sample);
    } else {
        sample.flags = 0;  // the first total of a run (or after a rebase) is where counting starts
        sample.energy_total_uj = published_uj_;
    }
    have_base_ = std::isfinite(total_uj);
    base_meter_uj_ = total_uj;
    base_published_uj_ = published_uj_;
    carried_uj_ = 0;
    last_at_ns_ = at_ns;
}

void ZoneTotal::publish_step(double delta_uj, uint64_t elapsed_ns, uint32_t flags, keplershm_zone_sample& sample) noexcept {
    if (!plausible(delta_uj, elapsed_ns)) {
        publish_invalid(flags, sample);
        return;
    }
    add(delta_uj, flags, sample);
}

void ZoneTotal::publish_invalid(uint32_t flags, keplershm_zone_sample& sample) const noexcept {
    sample.flags = flags & ~uint32_t{KEPLERSHM_ZONE_VALID};
    sample.energy_delta_uj = 0;
    sample.energy_total_uj = published_uj_;
}

}  // namespace kepler::collect
