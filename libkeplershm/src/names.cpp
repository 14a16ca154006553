// Names of the protocol's enum values, for the programs that label what frames carry.
#include "keplershm/keplershm.hpp"

namespace keplershm {

std::string_view runtime_name(uint32_t runtime) noexcept {
    switch (runtime) {
        case KEPLERSHM_RUNTIME_DOCKER: return "docker";
        case KEPLERSHM_RUNTIME_CONTAINERD: return "containerd";
        case KEPLERSHM_RUNTIME_CRIO: return "cri-o";
        case KEPLERSHM_RUNTIME_PODMAN: return "podman";
        case KEPLERSHM_RUNTIME_LIBVIRT: return "libvirt";
        case KEPLERSHM_RUNTIME_QEMU: return "qemu";
        case KEPLERSHM_RUNTIME_XEN: return "xen";
        case KEPLERSHM_RUNTIME_FIRECRACKER: return "firecracker";
        case KEPLERSHM_RUNTIME_CLOUD_HYPERVISOR: return "cloud-hypervisor";
        case KEPLERSHM_RUNTIME_VIRTUALBOX: return "virtualbox";
        case KEPLERSHM_RUNTIME_VMWARE: return "vmware";
        default: return "unknown";
    }
}

std::string_view hypervisor_name(uint32_t runtime) noexcept {
    switch (runtime) {
        // libvirt's scopes are its QEMU driver's; the microVMs run on KVM too (Kepler 0.11's values).
        case KEPLERSHM_RUNTIME_LIBVIRT:
        case KEPLERSHM_RUNTIME_QEMU:
        case KEPLERSHM_RUNTIME_FIRECRACKER:
        case KEPLERSHM_RUNTIME_CLOUD_HYPERVISOR: return "kvm";
        case KEPLERSHM_RUNTIME_XEN: return "xen";
        case KEPLERSHM_RUNTIME_VIRTUALBOX: return "virtualbox";
        case KEPLERSHM_RUNTIME_VMWARE: return "vmware";
        default: return "unknown";
    }
}

std::string_view power_source_name(uint32_t power_source) noexcept {
    switch (power_source) {
        case KEPLERSHM_POWER_RAPL: return "rapl";
        case KEPLERSHM_POWER_HWMON: return "hwmon";
        case KEPLERSHM_POWER_ACPI: return "acpi";
        case KEPLERSHM_POWER_REDFISH: return "redfish";
        case KEPLERSHM_POWER_PMBUS: return "pmbus";
        case KEPLERSHM_POWER_NVML: return "nvml";
        default: return "unknown";
    }
}

std::string_view meter_detail_name(uint32_t detail) noexcept {
    switch (detail) {
        // Redfish's own words, as Kepler 0.11's source_type label uses them.
        case KEPLERSHM_METER_POWER_SUPPLY: return "PowerSupply";
        case KEPLERSHM_METER_POWER_CONTROL: return "PowerControl";
        case KEPLERSHM_METER_POWER_METER: return "PowerMeter";
        default: return "";
    }
}

std::string_view gpu_vendor_name(uint32_t vendor) noexcept {
    switch (vendor) {
        case KEPLERSHM_GPU_NVIDIA: return "nvidia";
        case KEPLERSHM_GPU_AMD: return "amd";
        case KEPLERSHM_GPU_INTEL: return "intel";
        default: return "unknown";
    }
}

}  // namespace keplershm
