// vm_identity.hpp — the virtual machine a hypervisor process runs, read from its command line, for the
// VMMs that run one process per VM: QEMU (KVM or TCG, and as Xen's device model), Firecracker, Cloud
// Hypervisor, VirtualBox and VMware. libvirt's cgroup scopes name their VMs too (cgroup_identity.hpp);
// where both exist the scope says that it is a VM and the command line adds its UUID.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kepler::collect {

/// What a VMM's command line says of its VM. Plain value.
struct VmProcess {
    uint32_t runtime = 0;  // enum keplershm_runtime: KEPLERSHM_RUNTIME_QEMU, ..._XEN, ..._FIRECRACKER, ...
    std::string id;        // the VM's own id (QEMU -uuid, Firecracker --id, VirtualBox's machine UUID); empty: none given
    std::string name;      // -name guest=NAME, a socket's or .vmx file's stem, ...; empty: none given
};

/// The VM of a process, from its NUL-separated /proc/<pid>/cmdline; nullopt when the program is no VMM
/// this knows. Values are bounded (ids 64 bytes, names 128) and UUIDs kept in lower case.
[[nodiscard]] std::optional<VmProcess> identify_vm_process(std::string_view cmdline);

/// The id of a VM whose command line gives none: 16 hex digits of SHA-256 over its command line and its
/// process's identity (tgid, start time). The same VM process keeps it across collector restarts; two VMs
/// never share one, even with equal command lines; a VM started again is a new instance with a new id.
[[nodiscard]] std::string derived_vm_id(std::string_view cmdline, uint32_t tgid, uint64_t start_ticks);

/// Kepler's name for a VM without one: "<hypervisor>-<first 8 characters of its id>" ("kvm-1a2b3c4d").
[[nodiscard]] std::string default_vm_name(uint32_t runtime, std::string_view id);

}  // namespace kepler::collect
