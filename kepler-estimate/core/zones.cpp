#include "core/zones.hpp"

#include <array>

#include "keplershm.h"

namespace kepler::estimate {

namespace {
constexpr std::array<std::string_view, 7> kNames = {"package", "core", "uncore", "dram", "platform", "gpu", "other"};
}

std::string_view zone_name(ZoneKind kind) noexcept { return kNames[static_cast<size_t>(kind)]; }

std::optional<ZoneKind> zone_kind_from_protocol(uint32_t kind) noexcept {
    switch (kind) {
        case KEPLERSHM_ZONE_PACKAGE: return ZoneKind::package;
        case KEPLERSHM_ZONE_CORE: return ZoneKind::core;
        case KEPLERSHM_ZONE_UNCORE: return ZoneKind::uncore;
        case KEPLERSHM_ZONE_DRAM: return ZoneKind::dram;
        case KEPLERSHM_ZONE_PSYS: return ZoneKind::platform;
        case KEPLERSHM_ZONE_PLATFORM: return ZoneKind::platform;
        case KEPLERSHM_ZONE_GPU: return ZoneKind::gpu;
        case KEPLERSHM_ZONE_OTHER: return ZoneKind::other;
        default: return std::nullopt;
    }
}

uint32_t zone_kind_to_protocol(ZoneKind kind) noexcept {
    switch (kind) {
        case ZoneKind::package: return KEPLERSHM_ZONE_PACKAGE;
        case ZoneKind::core: return KEPLERSHM_ZONE_CORE;
        case ZoneKind::uncore: return KEPLERSHM_ZONE_UNCORE;
        case ZoneKind::dram: return KEPLERSHM_ZONE_DRAM;
        case ZoneKind::platform: return KEPLERSHM_ZONE_PLATFORM;
        case ZoneKind::gpu: return KEPLERSHM_ZONE_GPU;
        case ZoneKind::other: return KEPLERSHM_ZONE_OTHER;
    }
    return KEPLERSHM_ZONE_OTHER;
}

std::optional<ZoneKind> zone_kind_from_name(std::string_view name) noexcept {
    if (name == "psys") return ZoneKind::platform;
    for (size_t i = 0; i < kNames.size(); ++i) {
        if (kNames[i] == name) return static_cast<ZoneKind>(i);
    }
    return std::nullopt;
}

bool is_top_level(ZoneKind kind) noexcept {
    return kind == ZoneKind::package || kind == ZoneKind::dram || kind == ZoneKind::gpu || kind == ZoneKind::other;
}

std::string socket_label(uint32_t socket) { return socket == kWholeNode ? std::string("all") : std::to_string(socket); }

}  // namespace kepler::estimate
