// Measured node energy: the zones the collector read this interval (RAPL, hwmon, ACPI).
#include <algorithm>
#include <map>

#include "model/node_model.hpp"

namespace kepler::estimate {

namespace {

// A zone sample above this is a broken counter, not a computer (the largest servers draw ~10 kW).
constexpr double kMaxPlausibleWatts = 1e6;

std::string meter_name(uint32_t power_source) {
    switch (power_source) {
        case KEPLERSHM_POWER_RAPL: return "rapl";
        case KEPLERSHM_POWER_HWMON: return "hwmon";
        case KEPLERSHM_POWER_ACPI: return "acpi";
        default: return "meter";
    }
}

/// Not thread-safe (NodeModel contract): keeps the lowest power seen per zone as the idle figure,
/// Kepler's own method, so replays of the same recording give the same split.
class MeasuredModel final : public NodeModel {
public:
    std::string_view kind() const noexcept override { return "measured"; }
    std::optional<std::string> refusal(const NodeFacts& node) const override {
        if (!node.has_meter) return "node has no power meter";
        return std::nullopt;
    }
    CpuMatch cpu_match(const NodeFacts&) const override { return CpuMatch::exact; }

    std::optional<NodeEnergy> estimate(const FrameInput& in) override {
        const keplershm_header& segment = in.frame.segment();
        const uint32_t zone_count = std::min<uint32_t>(segment.zone_count, KEPLERSHM_MAX_ZONES);
        const double dt = in.features.interval_s;
        std::map<ZoneKey, uint64_t> energy;
        std::string source;
        for (const keplershm_zone_sample& s : in.frame.zones()) {
            if (!(s.flags & KEPLERSHM_ZONE_VALID) || s.zone_index >= zone_count) continue;
            const keplershm_zone_info& info = segment.zones[s.zone_index];
            const std::optional<ZoneKind> kind = zone_kind_from_protocol(info.kind);
            if (!kind) continue;
            if (static_cast<double>(s.energy_delta_uj) / 1e6 / dt > kMaxPlausibleWatts) continue;
            // Several zones of one kind on one socket (e.g. AMD dies) add up; duplicates are the
            // collector's to avoid.
            energy[ZoneKey{*kind, info.socket}] += s.energy_delta_uj;
            if (source.empty()) source = meter_name(info.power_source);
        }
        if (energy.empty()) return std::nullopt;
        NodeEnergy out;
        out.source = source;
        for (const auto& [zone, uj] : energy) {
            const double watts = static_cast<double>(uj) / 1e6 / dt;
            auto [it, fresh] = lowest_watts_.try_emplace(zone, watts);
            if (!fresh) it->second = std::min(it->second, watts);
            out.zones.push_back(ZoneEnergy{zone, uj, std::min(uj, watts_to_uj(it->second, dt))});
        }
        return out;
    }

private:
    std::map<ZoneKey, double> lowest_watts_;
};

}  // namespace

std::unique_ptr<NodeModel> make_measured_model() { return std::make_unique<MeasuredModel>(); }

}  // namespace kepler::estimate
