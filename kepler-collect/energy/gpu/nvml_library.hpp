// nvml_library.hpp — NVIDIA's NVML loaded at run time with dlopen: no build-time dependency on the driver,
// and a node without the library or a GPU simply has no NVIDIA zones. Each entry point is resolved by its
// exported name; one that an older driver lacks turns off the feature it serves, by name, not the GPUs.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "energy/gpu/nvml_api.hpp"

namespace kepler::collect::nvml {

/// NVML could not be used: the library is absent, lacks a required entry point, or nvmlInit failed.
class Unavailable : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// The loaded library, initialised. Entry points that the driver lacks are null (see missing()).
/// Thread-compatible: NVML itself is thread-safe, and this object is read-only after load().
class Library {
public:
    /// dlopen()s `path` ("libnvidia-ml.so.1" searches the loader's path, as the driver installs it),
    /// resolves the entry points and calls nvmlInit_v2. Throws Unavailable saying what is missing.
    static std::unique_ptr<Library> load(const std::string& path);
    ~Library();  // nvmlShutdown, then dlclose
    Library(const Library&) = delete;
    Library& operator=(const Library&) = delete;

    /// NVML's own text for a return code ("GPU is lost"), with the code.
    [[nodiscard]] std::string describe(Return code) const;
    /// Optional entry points this driver does not export (for the start-up log).
    [[nodiscard]] const std::vector<std::string>& missing() const noexcept { return missing_; }
    [[nodiscard]] const std::string& driver_version() const noexcept { return driver_version_; }

    // Required: without them there is nothing to read.
    ShutdownFn shutdown = nullptr;
    ErrorStringFn error_string = nullptr;
    DeviceGetCountFn device_count = nullptr;
    DeviceGetHandleByIndexFn handle_by_index = nullptr;
    // Optional, each serving one feature.
    DeviceGetTextFn uuid = nullptr;
    DeviceGetTextFn name = nullptr;
    DeviceGetPciInfoFn pci_info = nullptr;
    DeviceGetUIntFn power_limit = nullptr;
    DeviceGetUIntFn power_usage = nullptr;                 // mW: integrated where there is no counter
    DeviceGetULongLongFn total_energy = nullptr;           // mJ since the driver loaded (Volta and later)
    DeviceGetMigModeFn mig_mode = nullptr;
    DeviceGetUIntFn max_mig_devices = nullptr;
    DeviceGetMigDeviceHandleByIndexFn mig_handle = nullptr;
    DeviceGetUIntFn gpu_instance_id = nullptr;
    DeviceGetUIntFn compute_instance_id = nullptr;
    DeviceGetProcessesFn compute_processes = nullptr;
    DeviceGetProcessesFn graphics_processes = nullptr;
    DeviceGetProcessUtilizationFn process_utilization = nullptr;
    // GPM: MIG instances' activity (Hopper and later drivers).
    GpmQueryDeviceSupportFn gpm_query_support = nullptr;
    GpmSampleAllocFn gpm_sample_alloc = nullptr;
    GpmSampleFreeFn gpm_sample_free = nullptr;
    GpmMigSampleGetFn gpm_mig_sample = nullptr;
    GpmMetricsGetFn gpm_metrics = nullptr;
    /// Whether every GPM entry point is there.
    [[nodiscard]] bool has_gpm() const noexcept {
        return gpm_query_support != nullptr && gpm_sample_alloc != nullptr && gpm_sample_free != nullptr &&
               gpm_mig_sample != nullptr && gpm_metrics != nullptr;
    }

private:
    Library() = default;
    void* handle_ = nullptr;
    bool initialised_ = false;
    std::vector<std::string> missing_;
    std::string driver_version_;
};

}  // namespace kepler::collect::nvml
