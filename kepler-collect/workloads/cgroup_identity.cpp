#include "workloads/cgroup_identity.hpp"

#include <algorithm>

#include "common/text_io.hpp"

namespace kepler::collect {

namespace {

constexpr size_t kMaxCgroupLines = 64;
constexpr size_t kMaxPathBytes = 4096;

bool is_hex(std::string_view s) noexcept {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    });
}

/// Pod UIDs are UUIDs (or 32-hex config hashes for static pods); systemd spells '-' as '_'.
bool is_pod_uid(std::string_view s) noexcept {
    return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-' || c == '_';
    });
}

std::string_view strip(std::string_view s, std::string_view suffix) noexcept {
    return ends_with(s, suffix) ? s.substr(0, s.size() - suffix.size()) : s;
}

struct ScopePrefix {
    std::string_view prefix;
    uint32_t runtime;
    bool helper;
};
// Longer prefixes first: "crio-conmon-" must win over "crio-".
constexpr ScopePrefix kScopes[] = {
    {"cri-containerd-", KEPLERSHM_RUNTIME_CONTAINERD, false},
    {"crio-conmon-", KEPLERSHM_RUNTIME_CRIO, true},
    {"crio-", KEPLERSHM_RUNTIME_CRIO, false},
    {"docker-", KEPLERSHM_RUNTIME_DOCKER, false},
    {"libpod-conmon-", KEPLERSHM_RUNTIME_PODMAN, true},
    {"libpod-", KEPLERSHM_RUNTIME_PODMAN, false},
    {"nerdctl-", KEPLERSHM_RUNTIME_CONTAINERD, false},
};

/// "machine-qemu-1-ubuntu.scope" (after unescaping) or "qemu-1-ubuntu.libvirt-qemu" → "ubuntu" and
/// the machine name "qemu-1-ubuntu".
bool parse_libvirt_machine(std::string_view component, WorkloadIdentity& id) {
    std::string_view machine;
    if (starts_with(component, "machine-qemu-") && ends_with(component, ".scope")) {
        machine = strip(component.substr(8), ".scope");
    } else if (ends_with(component, ".libvirt-qemu")) {
        machine = strip(component, ".libvirt-qemu");
    } else {
        return false;
    }
    id.kind = KEPLERSHM_WORKLOAD_VM;
    id.runtime = KEPLERSHM_RUNTIME_LIBVIRT;
    id.vm_id = std::string(machine);
    // "qemu-<domain id>-<name>" (libvirt ≥ 1.3); older libvirt used the bare name.
    std::string_view name = machine;
    if (starts_with(name, "qemu-")) {
        const size_t dash = name.find('-', 5);
        if (dash != std::string_view::npos && parse_u64(name.substr(5, dash - 5))) name = name.substr(dash + 1);
    }
    id.vm_name = std::string(name);
    return true;
}

}  // namespace

/// Runtime-prefixed ids are 64 hex digits; accept 12..128 so abbreviated or future forms still match.
bool is_container_id(std::string_view text) noexcept { return text.size() >= 12 && text.size() <= 128 && is_hex(text); }

std::vector<CgroupLine> parse_proc_cgroup(std::string_view text) {
    std::vector<CgroupLine> lines;
    for (std::string_view line : split_lines(text)) {
        if (lines.size() == kMaxCgroupLines) break;
        const size_t first = line.find(':');
        const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
        if (second == std::string_view::npos) continue;
        const auto hierarchy = parse_u64(line.substr(0, first));
        const std::string_view path = line.substr(second + 1);
        if (!hierarchy || *hierarchy > UINT32_MAX || path.empty() || path[0] != '/' || path.size() > kMaxPathBytes) continue;
        lines.push_back(CgroupLine{static_cast<uint32_t>(*hierarchy), std::string(line.substr(first + 1, second - first - 1)),
                                   std::string(path)});
    }
    return lines;
}

std::string systemd_unescape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] == 'x' && is_hex(text.substr(i + 2, 2))) {
            out.push_back(static_cast<char>(std::stoi(std::string(text.substr(i + 2, 2)), nullptr, 16)));
            i += 3;
        } else {
            out.push_back(text[i]);
        }
    }
    return out;
}

namespace {

/// A kubepods component: the QoS class, and the pod uid of the systemd driver's
/// kubepods[-<qos>]-pod<uid with '_'>.slice.
void parse_kubepods_component(std::string_view c, WorkloadIdentity& id) {
    if (c.find("besteffort") != std::string_view::npos) id.qos = "besteffort";
    if (c.find("burstable") != std::string_view::npos) id.qos = "burstable";
    const size_t pod = c.rfind("-pod");
    if (pod != std::string_view::npos && ends_with(c, ".slice")) {
        const std::string_view uid = strip(c.substr(pod + 4), ".slice");
        if (is_pod_uid(uid)) {
            id.pod_uid = std::string(uid);
            std::replace(id.pod_uid.begin(), id.pod_uid.end(), '_', '-');
        }
    }
}

/// A container runtime's component: a scope named by runtime and id, podman's pod-level conmon cgroup,
/// or a bare 64-hex id. Whether it matched.
bool parse_container_component(std::string_view c, std::string_view previous, WorkloadIdentity& id) {
    for (const ScopePrefix& s : kScopes) {
        if (!starts_with(c, s.prefix)) continue;
        const std::string_view rest = strip(c.substr(s.prefix.size()), ".scope");
        if (!is_container_id(rest)) continue;
        id.runtime = s.runtime;
        id.runtime_helper = s.helper;
        id.container_id = s.helper ? std::string() : std::string(rest);
        return true;
    }
    // podman's cgroupfs manager puts a pod in /libpod_parent/<pod id>: its containers below it in
    // libpod-<container id> (matched above, which clears this), its conmon processes in
    // /libpod_parent/<pod id>/conmon. The pod id names no container: what runs there is the runtime.
    if (previous == "libpod_parent" && c.size() == 64 && is_hex(c)) {
        id.runtime = KEPLERSHM_RUNTIME_PODMAN;
        id.runtime_helper = true;
        id.container_id.clear();
        return true;
    }
    // cgroupfs layouts name the container by its bare 64-hex id: /docker/<id>, /kubepods/.../<id>.
    if (c.size() == 64 && is_hex(c)) {
        id.container_id = std::string(c);
        id.runtime_helper = false;
        id.runtime = previous == "docker" ? KEPLERSHM_RUNTIME_DOCKER : KEPLERSHM_RUNTIME_UNKNOWN;
        return true;
    }
    return false;
}

}  // namespace

WorkloadIdentity identify_cgroup_path(std::string_view path) {
    WorkloadIdentity id;
    if (path.size() > kMaxPathBytes) return id;
    bool in_kubepods = false;
    std::string_view previous;
    for (std::string_view raw : split_fields(path, "/")) {
        const std::string unescaped = systemd_unescape(raw);
        const std::string_view c = unescaped;
        if (c.find("kubepods") != std::string_view::npos) {
            in_kubepods = true;
            parse_kubepods_component(c, id);
        } else if (in_kubepods && (c == "besteffort" || c == "burstable")) {
            id.qos = std::string(c);  // cgroupfs driver: /kubepods/<qos>/pod<uid>/<container>
        } else if (in_kubepods && starts_with(c, "pod") && is_pod_uid(c.substr(3))) {
            id.pod_uid = std::string(c.substr(3));
        } else if (!parse_libvirt_machine(c, id)) {  // a VM's identity is kept; a runtime scope below overrides kind
            parse_container_component(c, previous, id);
        }
        previous = raw;
    }
    if (!id.pod_uid.empty()) {
        id.kind = KEPLERSHM_WORKLOAD_POD;
        if (id.qos.empty()) id.qos = "guaranteed";  // guaranteed pods sit directly under kubepods
    } else if (!id.container_id.empty() || id.runtime_helper) {
        id.kind = KEPLERSHM_WORKLOAD_CONTAINER;
    } else if (id.kind != KEPLERSHM_WORKLOAD_VM) {
        id.kind = KEPLERSHM_WORKLOAD_SYSTEM;
        id.runtime = KEPLERSHM_RUNTIME_UNKNOWN;
    }
    return id;
}

ChosenCgroup choose_cgroup(const std::vector<CgroupLine>& lines) {
    auto rank = [](const CgroupLine& l) {
        if (l.hierarchy == 0 && l.controllers.empty()) return 0;  // v2 unified
        const std::string c = "," + l.controllers + ",";
        if (c.find(",cpu,") != std::string::npos) return 1;
        if (c.find(",name=systemd,") != std::string::npos) return 2;
        return 3;
    };
    std::vector<const CgroupLine*> ordered;
    for (const CgroupLine& l : lines) ordered.push_back(&l);
    std::stable_sort(ordered.begin(), ordered.end(), [&](const CgroupLine* a, const CgroupLine* b) { return rank(*a) < rank(*b); });

    for (const CgroupLine* l : ordered) {
        WorkloadIdentity id = identify_cgroup_path(l->path);
        if (id.kind != KEPLERSHM_WORKLOAD_SYSTEM) return ChosenCgroup{l->path, l->controllers, std::move(id)};
    }
    for (const CgroupLine* l : ordered) {  // hybrid hosts often leave v2 at "/": a v1 path says more
        if (l->path != "/") return ChosenCgroup{l->path, l->controllers, identify_cgroup_path(l->path)};
    }
    return ChosenCgroup{"/", {}, WorkloadIdentity{}};
}

QemuIdentity parse_qemu_cmdline(std::string_view cmdline) {
    QemuIdentity q;
    const std::vector<std::string_view> args = split_cmdline(cmdline);
    if (args.empty()) return q;
    std::string_view program = args[0].substr(args[0].rfind('/') == std::string_view::npos ? 0 : args[0].rfind('/') + 1);
    q.is_qemu = starts_with(program, "qemu-system-") || program == "qemu-kvm" || program == "kvm";
    if (!q.is_qemu) return q;
    for (size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == "-name" || args[i] == "--name") {
            std::string_view value = args[i + 1];
            const size_t guest = value.find("guest=");
            if (guest != std::string_view::npos) value = value.substr(guest + 6);
            // QEMU option syntax: ',' separates options, ",," is a literal comma.
            std::string name;
            for (size_t k = 0; k < value.size() && name.size() < 256; ++k) {
                if (value[k] == ',') {
                    if (k + 1 < value.size() && value[k + 1] == ',') { name.push_back(','); ++k; continue; }
                    break;
                }
                name.push_back(value[k]);
            }
            q.name = name;
        } else if (args[i] == "-uuid" || args[i] == "--uuid") {
            if (args[i + 1].size() <= 64) q.uuid = std::string(args[i + 1]);
        }
    }
    return q;
}

}  // namespace kepler::collect
