// Parsing DRM fdinfo (drm_fdinfo.hpp).
#include "energy/gpu/drm_fdinfo.hpp"

#include <limits>

#include "common/text_io.hpp"

namespace kepler::collect {

namespace {

constexpr size_t kMaxValueText = 64;

/// "<uint>[ unit]" with unit ns, KiB, MiB, GiB or none; nullopt for anything else or an overflow.
std::optional<uint64_t> parse_quantity(std::string_view value) {
    const std::vector<std::string_view> parts = split_fields(value, " \t");
    if (parts.empty() || parts.size() > 2 || value.size() > kMaxValueText) return std::nullopt;
    const std::optional<uint64_t> number = parse_u64(parts[0]);
    if (!number) return std::nullopt;
    uint64_t scale = 1;
    if (parts.size() == 2) {
        const std::string_view unit = parts[1];
        if (unit == "KiB") scale = 1ull << 10;
        else if (unit == "MiB") scale = 1ull << 20;
        else if (unit == "GiB") scale = 1ull << 30;
        else if (unit != "ns") return std::nullopt;
    }
    if (*number > std::numeric_limits<uint64_t>::max() / scale) return std::nullopt;
    return *number * scale;
}

uint64_t saturating_add(uint64_t a, uint64_t b) {
    return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}

/// Memory regions by preference: resident VRAM is what a process holds on the device.
struct Memory {
    std::optional<uint64_t> resident, legacy, total;
    void add(std::optional<uint64_t>& field, uint64_t v) { field = saturating_add(field.value_or(0), v); }
};

void note_memory(std::string_view key, uint64_t bytes, Memory& m) {
    auto vram = [&](std::string_view prefix) { return starts_with(key, prefix) && starts_with(key.substr(prefix.size()), "vram"); };
    if (vram("drm-resident-")) m.add(m.resident, bytes);
    else if (vram("drm-memory-")) m.add(m.legacy, bytes);
    else if (vram("drm-total-")) m.add(m.total, bytes);
}

}  // namespace

std::optional<DrmClient> parse_drm_fdinfo(std::string_view text) {
    DrmClient c;
    bool has_id = false;
    Memory memory;
    for (std::string_view line : split_lines(text)) {
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos || !starts_with(line, "drm-")) continue;
        const std::string_view key = line.substr(0, colon);
        const std::string_view value = trim(line.substr(colon + 1));
        if (key == "drm-driver") c.driver = std::string(value.substr(0, 64));
        else if (key == "drm-pdev") c.pdev = std::string(value.substr(0, 64));
        else if (key == "drm-client-id") {
            const auto id = parse_u64(value);
            has_id = id.has_value();
            c.client_id = id.value_or(0);
        } else if (const auto quantity = parse_quantity(value)) {
            if (starts_with(key, "drm-engine-capacity-") || starts_with(key, "drm-maxfreq-")) continue;
            if (starts_with(key, "drm-engine-")) {
                c.has_engine_ns = true;
                c.engine_ns = saturating_add(c.engine_ns, *quantity);
            } else if (starts_with(key, "drm-total-cycles-")) {
                c.total_cycles = std::max(c.total_cycles, *quantity);
            } else if (starts_with(key, "drm-cycles-")) {
                c.has_cycles = true;
                c.cycles = saturating_add(c.cycles, *quantity);
            } else {
                note_memory(key, *quantity, memory);
            }
        }
    }
    if (!has_id || c.pdev.empty()) return std::nullopt;
    c.has_cycles = c.has_cycles && c.total_cycles > 0;
    c.memory_bytes = memory.resident.value_or(memory.legacy.value_or(memory.total.value_or(0)));
    return c;
}

}  // namespace kepler::collect
