#include "workloads/vm_identity.hpp"

#include <fmt/format.h>

#include <cctype>
#include <initializer_list>
#include <optional>
#include <vector>

#include "common/text_io.hpp"
#include "keplershm/keplershm.hpp"
#include "support/digest/sha256.hpp"

namespace kepler::collect {

namespace {

constexpr size_t kMaxId = 64;     // keplershm_workload.vm_id
constexpr size_t kMaxName = 128;  // keplershm_workload.vm_name

using Args = std::vector<std::string_view>;

std::string_view base_name(std::string_view path) {
    const size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view stem(std::string_view path) {
    const std::string_view file = base_name(path);
    const size_t dot = file.rfind('.');
    return dot == std::string_view::npos || dot == 0 ? file : file.substr(0, dot);
}

/// The value of `--opt VALUE` or `--opt=VALUE` for any of `names`; the last one given wins, as in the VMMs.
std::optional<std::string_view> option(const Args& args, std::initializer_list<std::string_view> names) {
    std::optional<std::string_view> found;
    for (size_t i = 1; i < args.size(); ++i) {
        for (const std::string_view name : names) {
            if (args[i] == name && i + 1 < args.size()) found = args[i + 1];
            if (starts_with(args[i], name) && args[i].size() > name.size() && args[i][name.size()] == '=') {
                found = args[i].substr(name.size() + 1);
            }
        }
    }
    return found;
}

/// A UUID in its 8-4-4-4-12 form, lower-cased; empty when `text` is not one.
std::string canonical_uuid(std::string_view text) {
    if (text.size() != 36) return {};
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        const auto c = static_cast<unsigned char>(text[i]);
        if (dash ? c != '-' : !std::isxdigit(c)) return {};
        out.push_back(static_cast<char>(std::tolower(c)));
    }
    return out;
}

/// Printable ASCII only, at most `limit` bytes: these become Prometheus label values.
std::string bounded(std::string_view text, size_t limit) {
    std::string out;
    for (const char c : text.substr(0, limit)) out.push_back(c >= 0x20 && c < 0x7f ? c : '_');
    return out;
}

/// QEMU's -name: "[guest=]NAME[,process=P][,debug-threads=on|off]", elements split at a comma, ",," a
/// literal comma. The name is the guest= element's value, or the first element when it has no key (QEMU's
/// implied "guest"); a "guest=" inside another element's value (process=guest=x) names nothing.
std::string qemu_name(std::string_view value) {
    std::vector<std::string> elements(1);
    for (size_t k = 0; k < value.size() && elements.size() <= 8; ++k) {  // QEMU knows three keys
        if (value[k] == ',' && k + 1 < value.size() && value[k + 1] == ',') {
            ++k;
        } else if (value[k] == ',') {
            elements.emplace_back();
            continue;
        }
        if (elements.back().size() < kMaxName + 6) elements.back().push_back(value[k]);  // room for "guest="
    }
    for (const std::string& element : elements) {
        if (starts_with(element, "guest=")) return bounded(std::string_view(element).substr(6), kMaxName);
    }
    return elements.front().find('=') == std::string::npos ? bounded(elements.front(), kMaxName) : std::string();
}

VmProcess qemu(const Args& args) {
    VmProcess vm;
    const auto accel = option(args, {"-accel", "--accel"});
    const auto machine = option(args, {"-machine", "--machine", "-M"});
    const bool xen = option(args, {"-xen-domid", "--xen-domid"}).has_value() || (accel && starts_with(*accel, "xen")) ||
                     (machine && (machine->find("accel=xen") != std::string_view::npos || starts_with(*machine, "xenfv") ||
                                  starts_with(*machine, "xenpv")));
    vm.runtime = xen ? KEPLERSHM_RUNTIME_XEN : KEPLERSHM_RUNTIME_QEMU;
    if (const auto name = option(args, {"-name", "--name"})) vm.name = qemu_name(*name);
    if (const auto uuid = option(args, {"-uuid", "--uuid"})) vm.id = canonical_uuid(*uuid);
    return vm;
}

VmProcess firecracker(const Args& args) {
    VmProcess vm;
    vm.runtime = KEPLERSHM_RUNTIME_FIRECRACKER;
    const auto id = option(args, {"--id"});
    // "anonymous-instance" is Firecracker's default: every unnamed microVM has it, so it names none.
    if (id && !id->empty() && *id != "anonymous-instance") vm.id = vm.name = bounded(*id, kMaxId);
    return vm;
}

VmProcess cloud_hypervisor(const Args& args) {
    VmProcess vm;
    vm.runtime = KEPLERSHM_RUNTIME_CLOUD_HYPERVISOR;
    // --api-socket path=/run/ch/vm1.sock (or the bare path): one socket per VM, its stem names the VM.
    if (auto socket = option(args, {"--api-socket"})) {
        if (const size_t at = socket->find("path="); at != std::string_view::npos) {
            socket = socket->substr(at + 5);
            socket = socket->substr(0, socket->find(','));
        }
        vm.name = bounded(stem(*socket), kMaxName);
    }
    return vm;
}

VmProcess virtualbox(const Args& args) {
    VmProcess vm;
    vm.runtime = KEPLERSHM_RUNTIME_VIRTUALBOX;
    // VBoxSVC starts "VBoxHeadless --comment NAME --startvm UUID"; by hand --startvm takes a name too.
    const auto start = option(args, {"--startvm", "-startvm", "-s"});
    if (start) vm.id = canonical_uuid(*start);
    if (const auto comment = option(args, {"--comment", "-comment"})) vm.name = bounded(*comment, kMaxName);
    if (vm.name.empty() && start && vm.id.empty()) vm.name = bounded(*start, kMaxName);
    return vm;
}

VmProcess vmware(const Args& args) {
    VmProcess vm;
    vm.runtime = KEPLERSHM_RUNTIME_VMWARE;
    for (size_t i = args.size(); i-- > 1;) {  // "vmware-vmx [options] /path/to/vm.vmx": the last .vmx
        if (ends_with(args[i], ".vmx")) {
            vm.name = bounded(stem(args[i]), kMaxName);
            break;
        }
    }
    return vm;
}

}  // namespace

std::optional<VmProcess> identify_vm_process(std::string_view cmdline) {
    const Args args = split_cmdline(cmdline);
    if (args.empty()) return std::nullopt;
    const std::string_view program = base_name(args[0]);
    if (starts_with(program, "qemu-system-") || program == "qemu-kvm" || program == "kvm") return qemu(args);
    if (program == "firecracker") return firecracker(args);
    if (program == "cloud-hypervisor") return cloud_hypervisor(args);
    if (program == "VBoxHeadless" || program == "VirtualBoxVM") return virtualbox(args);
    if (program == "vmware-vmx") return vmware(args);
    return std::nullopt;
}

std::string derived_vm_id(std::string_view cmdline, uint32_t tgid, uint64_t start_ticks) {
    const std::string key = fmt::format("{}\n{}\n{}", cmdline, tgid, start_ticks);
    return kepler::support::sha256_hex(key).substr(0, 16);
}

std::string default_vm_name(uint32_t runtime, std::string_view id) {
    return fmt::format("{}-{}", keplershm::hypervisor_name(runtime), id.substr(0, 8));
}

}  // namespace kepler::collect
