// Measured node energy: the zones the collector read this interval (RAPL, hwmon, ACPI).
#include <algorithm>
#include <map>

#include "model/node_model.hpp"

namespace kepler::estimate {

namespace {

// A zone sample above this is a broken counter, not a computer (the largest servers draw ~10 kW).
constexpr double kMaxPlausibleWatts = 1e6;

/// Which meter's platform zones are the node's when several meters measure the whole node (a BMC and
/// an ACPI meter both see the wall): the first present in this order. Each one alone already holds
/// every part of the node, so adding two would count the node twice.
constexpr uint32_t kPlatformPreference[] = {KEPLERSHM_POWER_REDFISH, KEPLERSHM_POWER_PMBUS, KEPLERSHM_POWER_ACPI,
                                            KEPLERSHM_POWER_HWMON, KEPLERSHM_POWER_RAPL};

size_t platform_rank(uint32_t power_source) {
    for (size_t i = 0; i < std::size(kPlatformPreference); ++i) {
        if (kPlatformPreference[i] == power_source) return i;
    }
    return std::size(kPlatformPreference);
}

struct ZoneSum {
    uint64_t uj = 0;
    std::string meter;
};

/// What the frame says of a GPU's users (by the device index of its zone).
struct GpuUse {
    bool listed = false;  // the collector read its users this interval
    bool used = false;    // someone used it
};

/// Per GPU zone socket: whether the frame lists its users, and whether it had any (Kepler's idle detection
/// reads idle power only while no process runs on the GPU).
std::map<uint32_t, GpuUse> gpu_use(const keplershm::FrameView& frame) {
    std::map<uint32_t, GpuUse> out;
    const keplershm_header& segment = frame.segment();
    const uint32_t zone_count = std::min<uint32_t>(segment.zone_count, KEPLERSHM_MAX_ZONES);
    const keplershm::Records<keplershm_gpu_device> devices = frame.gpu_devices();
    auto socket_of = [&](uint32_t device) -> std::optional<uint32_t> {
        if (device >= devices.size() || devices[device].zone_index >= zone_count) return std::nullopt;
        const keplershm_zone_info& zone = segment.zones[devices[device].zone_index];
        if (zone.kind != KEPLERSHM_ZONE_GPU) return std::nullopt;
        return zone.socket;
    };
    for (uint32_t d = 0; d < devices.size(); ++d) {
        if (const auto socket = socket_of(d); socket && (devices[d].flags & KEPLERSHM_GPU_USAGE_VALID)) out[*socket].listed = true;
    }
    for (const keplershm_gpu_usage& u : frame.gpu_usage()) {
        if (const auto socket = socket_of(u.device)) out[*socket].used = true;
    }
    return out;
}

/// Not thread-safe (NodeModel contract): keeps the lowest power seen per zone as the idle figure,
/// Kepler's own method, so replays of the same recording give the same split.
class MeasuredModel final : public NodeModel {
public:
    explicit MeasuredModel(GpuIdleWatts gpu_idle) : gpu_idle_(std::move(gpu_idle)) {}
    std::string_view kind() const noexcept override { return "measured"; }
    std::string no_answer_reason() const override { return "no valid meter reading in the frame"; }
    std::optional<std::string> refusal(const NodeFacts& node) const override {
        if (!node.has_meter) return "node has no power meter";
        return std::nullopt;
    }
    CpuMatch cpu_match(const NodeFacts&) const override { return CpuMatch::exact; }

    std::optional<NodeEnergy> estimate(const FrameInput& in) override {
        std::map<ZoneKey, ZoneSum> energy = measured_zones(in);
        if (energy.empty()) return std::nullopt;
        add_other_part(energy);
        NodeEnergy out;
        const double dt = in.features.interval_s;
        const std::map<uint32_t, GpuUse> gpus = gpu_use(in.frame);
        for (const auto& [zone, sum] : energy) {
            if (out.source.empty()) out.source = sum.meter;
            const double watts = static_cast<double>(sum.uj) / 1e6 / dt;
            const std::optional<double> idle = zone.kind == ZoneKind::gpu ? gpu_idle_watts(zone.socket, watts, gpus) : lowest(zone, watts);
            out.zones.push_back(ZoneEnergy{zone, sum.uj, std::min(sum.uj, watts_to_uj(idle.value_or(0.0), dt)), sum.meter});
        }
        return out;
    }

    /// A GPU's idle power (Kepler's rule): configured; else where the frames list its users, the lowest
    /// power seen while nobody used it (nothing before that was seen); else the lowest power seen.
    std::optional<double> gpu_idle_watts(uint32_t socket, double watts, const std::map<uint32_t, GpuUse>& gpus) {
        if (const std::optional<double> configured = gpu_idle_.of(socket)) return *configured;
        const ZoneKey key{ZoneKind::gpu, socket};
        const auto use = gpus.find(socket);
        if (use == gpus.end() || !use->second.listed) return lowest(key, watts);
        if (!use->second.used) return lowest(key, watts);  // idle now: a reading of idle power
        const auto seen = lowest_watts_.find(key);
        return seen != lowest_watts_.end() ? std::optional<double>(seen->second) : std::nullopt;
    }

    /// Lowest power seen on `zone` so far, this reading included.
    double lowest(const ZoneKey& zone, double watts) {
        auto [it, fresh] = lowest_watts_.try_emplace(zone, watts);
        if (!fresh) it->second = std::min(it->second, watts);
        return it->second;
    }

private:
    /// The frame's valid zones by (kind, socket): several of one kind on one socket add up (AMD dies,
    /// power supplies); platform zones only from the preferred meter; zones of kind other (meters of
    /// parts the collector cannot name) are in no total and left out.
    static std::map<ZoneKey, ZoneSum> measured_zones(const FrameInput& in) {
        const keplershm_header& segment = in.frame.segment();
        const uint32_t zone_count = std::min<uint32_t>(segment.zone_count, KEPLERSHM_MAX_ZONES);
        const double dt = in.features.interval_s;
        size_t best_platform = std::size(kPlatformPreference) + 1;
        for (uint32_t i = 0; i < zone_count; ++i) {
            const std::optional<ZoneKind> kind = zone_kind_from_protocol(segment.zones[i].kind);
            if (kind == ZoneKind::platform) best_platform = std::min(best_platform, platform_rank(segment.zones[i].power_source));
        }
        std::map<ZoneKey, ZoneSum> energy;
        for (const keplershm_zone_sample& s : in.frame.zones()) {
            if (!(s.flags & KEPLERSHM_ZONE_VALID) || s.zone_index >= zone_count) continue;
            const keplershm_zone_info& info = segment.zones[s.zone_index];
            const std::optional<ZoneKind> kind = zone_kind_from_protocol(info.kind);
            if (!kind || *kind == ZoneKind::other) continue;
            if (*kind == ZoneKind::platform && platform_rank(info.power_source) != best_platform) continue;
            if (static_cast<double>(s.energy_delta_uj) / 1e6 / dt > kMaxPlausibleWatts) continue;
            const ZoneKey key{*kind, *kind == ZoneKind::platform ? 0u : info.socket};
            ZoneSum& sum = energy[key];
            sum.uj += s.energy_delta_uj;
            sum.meter = std::string(keplershm::power_source_name(info.power_source));
        }
        return energy;
    }

    /// The node's `other` part (MODELS.md): what the platform meter saw beyond package, DRAM and GPU —
    /// fans, disks, network cards, memory controllers outside RAPL, the power supplies' own loss.
    static void add_other_part(std::map<ZoneKey, ZoneSum>& energy) {
        const auto platform = energy.find(ZoneKey{ZoneKind::platform, 0});
        if (platform == energy.end()) return;
        uint64_t parts = 0;
        for (const auto& [zone, sum] : energy) {
            if (zone.kind == ZoneKind::package || zone.kind == ZoneKind::dram || zone.kind == ZoneKind::gpu) parts += sum.uj;
        }
        const uint64_t other = platform->second.uj > parts ? platform->second.uj - parts : 0;
        energy[ZoneKey{ZoneKind::other, kWholeNode}] = ZoneSum{other, platform->second.meter};
    }

    GpuIdleWatts gpu_idle_;
    std::map<ZoneKey, double> lowest_watts_;
};

}  // namespace

std::unique_ptr<NodeModel> make_measured_model(GpuIdleWatts gpu_idle) {
    return std::make_unique<MeasuredModel>(std::move(gpu_idle));
}

}  // namespace kepler::estimate
