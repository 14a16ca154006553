// libFuzzer: the DRM client usage stats the collector reads from other processes' /proc/<pid>/fdinfo/<fd>
// (kepler-collect/energy/gpu/drm_fdinfo.cpp). Any bytes: a client is returned only with a device and a
// client id taken from the text, its strings stay within their bounds, and a cycle count comes only with
// the timestamp it is counted against.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "energy/gpu/drm_fdinfo.hpp"

namespace {

void require(bool holds) {
    if (!holds) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto client = kepler::collect::parse_drm_fdinfo(text);
    if (!client) return 0;
    require(!client->pdev.empty() && client->pdev.size() <= 64 && client->driver.size() <= 64);
    require(text.find("drm-client-id") != std::string_view::npos && text.find(client->pdev) != std::string_view::npos);
    require(!client->has_cycles || client->total_cycles > 0);
    require(client->has_engine_ns || client->engine_ns == 0);
    return 0;
}
