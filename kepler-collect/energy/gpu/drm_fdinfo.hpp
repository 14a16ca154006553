// drm_fdinfo.hpp — a DRM client as the kernel describes it in /proc/<pid>/fdinfo/<fd> (the "DRM client
// usage stats" of Documentation/gpu/drm-usage-stats.rst): which device, which client, how long its
// engines ran and how much memory it holds. amdgpu and i915 give engine time in ns (drm-engine-<engine>);
// xe gives GPU cycles (drm-cycles-<engine> over drm-total-cycles-<engine>). The text is untrusted: lines
// and numbers are bounded, unknown keys are ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kepler::collect {

struct DrmClient {
    std::string driver;          // drm-driver
    std::string pdev;            // drm-pdev: the device's PCI address ("0000:03:00.0")
    uint64_t client_id = 0;      // drm-client-id: one per open of the device (shared by dup'd fds)
    bool has_engine_ns = false;  // any drm-engine-<engine> (ns)
    uint64_t engine_ns = 0;      // sum over engines
    bool has_cycles = false;     // any drm-cycles-<engine> with its drm-total-cycles-<engine>
    uint64_t cycles = 0;         // sum over engines of busy cycles
    uint64_t total_cycles = 0;   // the GPU timestamp the cycles are counted against (largest over engines)
    uint64_t memory_bytes = 0;   // resident VRAM (drm-resident-vram*, else drm-memory-vram*, else drm-total-vram*)
};

/// The client an fdinfo file describes, or nullopt when it is not a DRM client (no drm-client-id or
/// drm-pdev: another kind of file, or a driver without usage stats).
[[nodiscard]] std::optional<DrmClient> parse_drm_fdinfo(std::string_view text);

}  // namespace kepler::collect
