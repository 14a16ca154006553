// energy_source.hpp — the collector's energy-source layer: a source publishes zones (fixed when it is
// discovered, since zones belong to the segment header) and gives one sample per zone each interval
// without waiting on anything slow. Local counters (RAPL, hwmon) are read in place; remote meters (a
// BMC) are read on their own thread and the frame loop takes their newest reading. The two ways of
// turning readings into energy are shared here: a wrapping counter, and power integrated over time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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

/// Energy of a meter that reports power, from readings stamped with the time each was taken.
/// Between two readings the power is the earlier one held (a remote meter's reading stands until the
/// next one arrives), so the energy known at a reading is exactly the energy that extrapolating the
/// previous one predicted: the total never steps back when a reading arrives. A reading more than
/// `max_age` after the previous one ends a gap whose energy is unknown: it is not counted.
class HeldPowerIntegral {
public:
    explicit HeldPowerIntegral(uint64_t max_age_ns) noexcept : max_age_ns_(max_age_ns) {}
    /// A reading taken at time_ns (CLOCK_MONOTONIC); readings not after the previous one are ignored.
    void add(uint64_t time_ns, double watts) noexcept;
    /// Energy (µJ) from the first reading up to `at_ns`, the newest reading held for at most max_age;
    /// nullopt before the first reading. A time before the newest reading (it arrived after the frame
    /// the caller is closing) is answered from the reading before it.
    [[nodiscard]] std::optional<double> total_uj(uint64_t at_ns) const noexcept;
    /// True when the newest reading is older than max_age (or there is none).
    [[nodiscard]] bool stale(uint64_t now_ns) const noexcept;
    [[nodiscard]] uint64_t last_reading_ns() const noexcept { return last_ns_; }

private:
    uint64_t max_age_ns_;
    bool have_reading_ = false;
    uint64_t last_ns_ = 0;
    double last_watts_ = 0;
    double energy_uj_ = 0;  // up to last_ns_
    uint64_t previous_ns_ = 0;  // the reading before the newest one (held until last_ns_)
    double previous_watts_ = 0;
    bool have_previous_ = false;
};

/// The most power a zone of this kind can draw (W): a step above it in the time it took is a counter
/// jump (a reset reported as a huge value, a BMC's corrupted total), not energy. Ten times and more the
/// largest parts sold today, so a ceiling never clips a real load (kepler-collect/README.md, "Energy
/// ceilings").
[[nodiscard]] double ceiling_watts(uint32_t zone_kind) noexcept;

/// Whether `delta_uj` (finite, not negative) could have been drawn in `elapsed_ns` under `ceiling_watts`.
[[nodiscard]] bool within_ceiling(double delta_uj, uint64_t elapsed_ns, double ceiling_watts) noexcept;

/// The one place every source's energy reaches the frames: a zone's running total as frame samples,
/// deltas never negative, the total never decreasing, and every step bounded by the zone's ceiling
/// before any conversion. A step above the ceiling (or not a finite number) rebases the zone: that
/// interval is invalid, counting goes on from the new value, and one warning says so (then at every
/// power of two of such jumps). A total that another clock disciplines (a BMC's own energy counter) is
/// followed without steps: a correction is spread over the intervals after it (added at once when the
/// meter counted more; held back from later intervals when it counted less).
class ZoneTotal {
public:
    /// `origin` names the zone in messages ("package-0 (intel-rapl:0)").
    ZoneTotal(std::string origin, double ceiling_watts) : origin_(std::move(origin)), ceiling_watts_(ceiling_watts) {}
    /// A meter that reports its running total: the sample for an interval ending at `at_ns`
    /// (CLOCK_MONOTONIC) whose meter total is now `total_uj` (a double: fractions carry).
    void publish(double total_uj, uint64_t at_ns, uint32_t flags, keplershm_zone_sample& sample) noexcept;
    /// A meter read as steps (a wrap-corrected counter, integrated power): `delta_uj` over `elapsed_ns`.
    void publish_step(double delta_uj, uint64_t elapsed_ns, uint32_t flags, keplershm_zone_sample& sample) noexcept;
    /// An interval without a usable reading: no energy, the total unchanged.
    void publish_invalid(uint32_t flags, keplershm_zone_sample& sample) const noexcept;
    /// Restarts from the next total (the meter's total jumped, e.g. after a gap it did not count).
    void rebase() noexcept { have_base_ = false; }
    /// Steps refused as above the ceiling, since the start.
    [[nodiscard]] uint64_t jumps() const noexcept { return jumps_; }

private:
    /// Whether `delta_uj` in `elapsed_ns` is energy the zone could have drawn; counts and says when not.
    bool plausible(double delta_uj, uint64_t elapsed_ns) noexcept;
    void add(double delta_uj, uint32_t flags, keplershm_zone_sample& sample) noexcept;

    std::string origin_;
    double ceiling_watts_;
    bool have_base_ = false;
    double base_meter_uj_ = 0;        // the meter's total at the base
    uint64_t base_published_uj_ = 0;  // what was published at the base
    uint64_t last_at_ns_ = 0;         // the interval end of the last publish()
    double carried_uj_ = 0;           // a step's fraction of a µJ, not yet published
    uint64_t published_uj_ = 0;       // cumulative as published
    uint64_t jumps_ = 0;
};

/// A source of zones. Not thread-safe: the frame loop calls it; a source with a thread of its own
/// synchronises internally.
class EnergySource {
public:
    virtual ~EnergySource() = default;
    /// "sysfs", "redfish <bmc id>": for messages.
    [[nodiscard]] virtual std::string describe() const = 0;
    /// Header entries of this source's zones, in the order of read()'s samples.
    [[nodiscard]] virtual const std::vector<keplershm_zone_info>& zones() const noexcept = 0;
    /// One sample per zone (zone_index is set by the caller) for the interval ending at `frame_end_ns`
    /// (CLOCK_MONOTONIC, at most now): local meters are read now, sources that hold remote readings count
    /// energy up to that instant, so that a zone's energy covers the frame's own interval. Never blocks
    /// on a device or the network.
    virtual void read(std::span<keplershm_zone_sample> samples, uint64_t frame_end_ns) = 0;
};

}  // namespace kepler::collect
