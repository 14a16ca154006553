// Loading NVML: dlopen, dlsym by exported name, nvmlInit_v2 (nvml_library.hpp).
#include "energy/gpu/nvml_library.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

namespace kepler::collect::nvml {

namespace {

/// A symbol's address as the function-pointer type it is declared with (POSIX guarantees the conversion).
template <class Fn>
Fn symbol(void* handle, const char* name) {
    return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

std::unique_ptr<Library> Library::load(const std::string& path) {
    std::unique_ptr<Library> lib(new Library());
    dlerror();
    lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib->handle_ == nullptr) {
        const char* why = dlerror();
        throw Unavailable(fmt::format("cannot load {}: {}", path, why != nullptr ? why : "unknown dlopen error"));
    }
    void* h = lib->handle_;
    const auto init = symbol<InitFn>(h, "nvmlInit_v2");
    lib->shutdown = symbol<ShutdownFn>(h, "nvmlShutdown");
    lib->error_string = symbol<ErrorStringFn>(h, "nvmlErrorString");
    lib->device_count = symbol<DeviceGetCountFn>(h, "nvmlDeviceGetCount_v2");
    lib->handle_by_index = symbol<DeviceGetHandleByIndexFn>(h, "nvmlDeviceGetHandleByIndex_v2");
    if (init == nullptr || lib->shutdown == nullptr || lib->device_count == nullptr || lib->handle_by_index == nullptr) {
        throw Unavailable(fmt::format("{} is not an NVML library this collector can use: it lacks nvmlInit_v2, "
                                      "nvmlShutdown, nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2", path));
    }
    auto optional = [&](auto& field, const char* name) {
        field = symbol<std::remove_reference_t<decltype(field)>>(h, name);
        if (field == nullptr) lib->missing_.emplace_back(name);
    };
    optional(lib->uuid, "nvmlDeviceGetUUID");
    optional(lib->name, "nvmlDeviceGetName");
    optional(lib->pci_info, "nvmlDeviceGetPciInfo_v3");
    optional(lib->power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    optional(lib->power_usage, "nvmlDeviceGetPowerUsage");
    optional(lib->total_energy, "nvmlDeviceGetTotalEnergyConsumption");
    optional(lib->mig_mode, "nvmlDeviceGetMigMode");
    optional(lib->max_mig_devices, "nvmlDeviceGetMaxMigDeviceCount");
    optional(lib->mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex");
    optional(lib->gpu_instance_id, "nvmlDeviceGetGpuInstanceId");
    optional(lib->compute_instance_id, "nvmlDeviceGetComputeInstanceId");
    optional(lib->compute_processes, "nvmlDeviceGetComputeRunningProcesses_v3");
    optional(lib->graphics_processes, "nvmlDeviceGetGraphicsRunningProcesses_v3");
    optional(lib->process_utilization, "nvmlDeviceGetProcessUtilization");
    optional(lib->gpm_query_support, "nvmlGpmQueryDeviceSupport");
    optional(lib->gpm_sample_alloc, "nvmlGpmSampleAlloc");
    optional(lib->gpm_sample_free, "nvmlGpmSampleFree");
    optional(lib->gpm_mig_sample, "nvmlGpmMigSampleGet");
    optional(lib->gpm_metrics, "nvmlGpmMetricsGet");

    const Return rc = init();
    if (rc != kSuccess) throw Unavailable(fmt::format("nvmlInit_v2 failed: {}", lib->describe(rc)));
    lib->initialised_ = true;
    if (const auto version = symbol<SystemGetDriverVersionFn>(h, "nvmlSystemGetDriverVersion")) {
        char text[kSystemDriverVersionBufferSize] = {};
        if (version(text, sizeof text) == kSuccess) lib->driver_version_.assign(text, strnlen(text, sizeof text));
    }
    return lib;
}

Library::~Library() {
    if (initialised_) shutdown();
    if (handle_ != nullptr) dlclose(handle_);
}

std::string Library::describe(Return code) const {
    const char* text = error_string != nullptr ? error_string(code) : nullptr;
    return fmt::format("{} (NVML error {})", text != nullptr ? text : "unknown", code);
}

}  // namespace kepler::collect::nvml
