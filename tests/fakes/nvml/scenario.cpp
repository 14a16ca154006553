// scenario.cpp — JSON → fake_nvml::Scenario. Missing keys take the defaults in scenario.hpp; a key of the
// wrong type makes the whole file invalid, so that a typo in a test shows as "scenario kept" rather than
// as a silently different device.
#include "scenario.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <stdexcept>

namespace fake_nvml {
namespace {

using nlohmann::json;

template <typename T>
void read_key(const json& object, const char* key, T& out) {
    if (auto it = object.find(key); it != object.end()) out = it->get<T>();
}

void require_object(const json& j) {
    if (!j.is_object()) throw std::invalid_argument("a device or process must be a JSON object");
}

Process parse_process(const json& j) {
    require_object(j);
    Process p;
    read_key(j, "pid", p.pid);
    std::string type = "compute";
    read_key(j, "type", type);
    if (type != "compute" && type != "graphics" && type != "both")
        throw std::invalid_argument("process type must be compute, graphics or both");
    p.compute = type != "graphics";
    p.graphics = type != "compute";
    read_key(j, "used_memory_bytes", p.used_memory_bytes);
    read_key(j, "sm_util", p.sm_util);
    read_key(j, "mem_util", p.mem_util);
    return p;
}

// The array under `key`, or an empty one; iterating a non-array would quietly walk an object's values.
const json& array_at(const json& owner, const char* key) {
    static const json empty = json::array();
    auto it = owner.find(key);
    if (it == owner.end()) return empty;
    if (!it->is_array()) throw std::invalid_argument(std::string(key) + " must be an array");
    return *it;
}

std::vector<Process> parse_processes(const json& owner) {
    std::vector<Process> out;
    for (const json& p : array_at(owner, "processes")) out.push_back(parse_process(p));
    return out;
}

MigDevice parse_mig_device(const json& j, std::size_t gpu, std::size_t index) {
    require_object(j);
    MigDevice m;
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "MIG-00000000-0000-0000-%04zx-%012zx", gpu, index);
    m.uuid = uuid;
    read_key(j, "uuid", m.uuid);
    read_key(j, "gpu_instance_id", m.gpu_instance_id);
    read_key(j, "compute_instance_id", m.compute_instance_id);
    read_key(j, "gr_active_percent", m.gr_active_percent);
    m.processes = parse_processes(j);
    return m;
}

// Defaults that differ per device, so that a scenario listing only powers still has distinct GPUs.
void set_identity_defaults(Device& d, std::size_t index) {
    char text[64];
    std::snprintf(text, sizeof text, "GPU-00000000-0000-0000-0000-%012zx", index);
    d.uuid = text;
    std::snprintf(text, sizeof text, "00000000:%02zX:00.0", (index + 1) & 0xFF);
    d.pci_bus_id = text;
}

Device parse_device(const json& j, std::size_t index) {
    require_object(j);
    Device d;
    set_identity_defaults(d, index);
    read_key(j, "uuid", d.uuid);
    read_key(j, "name", d.name);
    read_key(j, "pci_bus_id", d.pci_bus_id);
    read_key(j, "power_w", d.power_w);
    std::string energy = "counter";
    read_key(j, "energy", energy);
    if (energy != "counter" && energy != "unsupported")
        throw std::invalid_argument("energy must be counter or unsupported");
    d.energy_supported = energy == "counter";
    read_key(j, "energy_offset_mj", d.energy_offset_mj);
    read_key(j, "driver_generation", d.driver_generation);
    read_key(j, "lost", d.lost);
    read_key(j, "errors", d.errors);
    read_key(j, "power_limit_w", d.power_limit_w);
    read_key(j, "mig_mode", d.mig_mode);
    read_key(j, "gpm", d.gpm);
    d.processes = parse_processes(j);
    for (const json& m : array_at(j, "mig_devices"))
        d.mig_devices.push_back(parse_mig_device(m, index, d.mig_devices.size()));
    return d;
}

}  // namespace

std::optional<Scenario> parse_scenario(const std::string& text) {
    try {
        const json j = json::parse(text);
        Scenario s;
        read_key(j, "init_error", s.init_error);
        read_key(j, "driver_version", s.driver_version);
        read_key(j, "nvml_version", s.nvml_version);
        if (!j.contains("devices")) return std::nullopt;
        for (const json& d : array_at(j, "devices")) s.devices.push_back(parse_device(d, s.devices.size()));
        return s;
    } catch (const std::exception&) {
        return std::nullopt;  // json::exception (syntax, type, missing "devices") or a bad enum value
    }
}

}  // namespace fake_nvml
