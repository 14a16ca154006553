// libFuzzer: hypervisor command lines (kepler-collect/workloads/vm_identity.cpp), which any user who can
// start a process writes. Any bytes, read as a NUL-separated /proc/<pid>/cmdline: a VM found has a known
// runtime, an id that is empty or fits the frame and (QEMU's -uuid) is a lower-case UUID, a name that is
// printable and fits the frame; the derived id and the default name have their fixed forms.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "keplershm/keplershm.hpp"
#include "workloads/vm_identity.hpp"

namespace {

using namespace kepler::collect;

void require(bool holds) {
    if (!holds) __builtin_trap();
}

bool is_printable(std::string_view text) {
    return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

bool is_lower_hex(std::string_view text) {
    return std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_uuid(std::string_view id) {
    if (id.size() != 36) return false;
    for (size_t i = 0; i < id.size(); ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? id[i] != '-' : !is_lower_hex(id.substr(i, 1))) return false;
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view cmdline(reinterpret_cast<const char*>(data), size);
    const auto vm = identify_vm_process(cmdline);
    if (!vm) return 0;
    require(vm->runtime >= KEPLERSHM_RUNTIME_QEMU && vm->runtime <= KEPLERSHM_RUNTIME_VMWARE);
    require(keplershm::hypervisor_name(vm->runtime) != "unknown");
    require(vm->id.size() <= 64 && is_printable(vm->id));
    require(vm->name.size() <= 128 && is_printable(vm->name));
    if (vm->runtime == KEPLERSHM_RUNTIME_QEMU || vm->runtime == KEPLERSHM_RUNTIME_XEN) require(vm->id.empty() || is_uuid(vm->id));

    const std::string id = vm->id.empty() ? derived_vm_id(cmdline, 4242, 99) : vm->id;
    require(!vm->id.empty() || (id.size() == 16 && is_lower_hex(id)));
    const std::string name = default_vm_name(vm->runtime, id);
    require(name.size() <= 128 && name.find('-') != std::string::npos && is_printable(name));
    return 0;
}
