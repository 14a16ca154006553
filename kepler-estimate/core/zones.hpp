// Energy zones as the estimator names them: Kepler's zone names plus a socket index.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kepler::estimate {

/// Kepler 0.7's zone names; RAPL psys and hwmon/ACPI meters both map to `platform`.
enum class ZoneKind : uint8_t { package, core, uncore, dram, platform, gpu, other };
/// How many kinds there are: arrays indexed by kind are this long (`other` is the last).
inline constexpr size_t kZoneKindCount = static_cast<size_t>(ZoneKind::other) + 1;

/// Socket label of a zone that a node model predicts for the whole node (MODELS.md).
inline constexpr uint32_t kWholeNode = 0xffffffffu;

/// One zone of one socket (or of the whole node). Plain value.
struct ZoneKey {
    ZoneKind kind = ZoneKind::package;
    uint32_t socket = kWholeNode;
    auto operator<=>(const ZoneKey&) const = default;
};

[[nodiscard]] std::string_view zone_name(ZoneKind kind) noexcept;
/// Protocol zone kind (enum keplershm_zone_kind) to the Kepler name; nullopt for unknown values.
[[nodiscard]] std::optional<ZoneKind> zone_kind_from_protocol(uint32_t kind) noexcept;
/// The protocol's zone kind for a Kepler zone (`platform` is KEPLERSHM_ZONE_PLATFORM).
[[nodiscard]] uint32_t zone_kind_to_protocol(ZoneKind kind) noexcept;
/// Model target names of MODELS.md ("package", "core", "uncore", "dram", "psys", "platform", ...).
[[nodiscard]] std::optional<ZoneKind> zone_kind_from_name(std::string_view name) noexcept;
/// Zones whose sum is a workload's total (`kepler_*_joules_total`): package, dram, gpu and other, as
/// in Kepler; core and uncore are parts of package and platform contains them all.
[[nodiscard]] bool is_top_level(ZoneKind kind) noexcept;
/// The `package` label: the socket number, or "all" for a whole-node zone.
[[nodiscard]] std::string socket_label(uint32_t socket);

}  // namespace kepler::estimate
