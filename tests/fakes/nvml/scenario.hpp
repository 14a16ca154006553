// scenario.hpp — what the fake NVML reads from the JSON file named by FAKE_NVML_SCENARIO: the devices a
// test wants the collector to see, parsed into plain values. No clocks, no state: fake_nvml.cpp adds those.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fake_nvml {

struct Process {
    unsigned pid = 0;
    bool compute = true;   // "type": "compute" or "both"
    bool graphics = false; // "type": "graphics" or "both"
    unsigned long long used_memory_bytes = 0;
    unsigned sm_util = 0;
    unsigned mem_util = 0;
};

struct MigDevice {
    std::string uuid;
    unsigned gpu_instance_id = 0;
    unsigned compute_instance_id = 0;
    double gr_active_percent = 0.0;  // GPM's graphics activity of its GPU instance (the first CI's figure counts)
    std::vector<Process> processes;
};

struct Device {
    std::string uuid;
    std::string name = "NVIDIA Fake GPU";
    std::string pci_bus_id;
    double power_w = 0.0;
    bool energy_supported = true;  // "energy": "counter" (default) or "unsupported"
    unsigned long long energy_offset_mj = 0;
    long long driver_generation = 0;
    bool lost = false;
    std::map<std::string, int> errors;  // NVML function name → the return code it gives instead
    double power_limit_w = 700.0;
    unsigned mig_mode = 0;
    bool gpm = false;  // GPU Performance Monitoring (Hopper and later)
    std::vector<Process> processes;
    std::vector<MigDevice> mig_devices;
};

struct Scenario {
    int init_error = 0;
    std::string driver_version = "550.54.15";
    std::string nvml_version = "12.550.54.15";
    std::vector<Device> devices;
};

/// The scenario in `text`, or nothing when it is not JSON or not a scenario (the caller keeps what it had).
std::optional<Scenario> parse_scenario(const std::string& text);

}  // namespace fake_nvml
