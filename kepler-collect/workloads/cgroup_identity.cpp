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

/// Where a runtime puts the cgroups it names "<prefix><id>[.scope]": the places below whose children
/// only that runtime (as root, or the user of a rootless one) creates.
enum ScopeHome : unsigned {
    kInPod = 1u << 0,           // a pod's slice or directory in kubelet's hierarchy (CRI runtimes)
    kInSystemSlice = 1u << 1,   // /system.slice (docker and nerdctl with the systemd driver)
    kInMachineSlice = 1u << 2,  // /machine.slice and its pod slices, /libpod_parent (podman, rootful)
    kRootless = 1u << 3,        // anywhere below user@<uid>.service (podman, docker, nerdctl, rootless)
    // Places the admin chooses, where the path cannot tell root's runtime from a user's delegated subtree
    // and the cgroup directory's owner decides (owner_decides):
    kInService = 1u << 4,      // a child of a system service: podman --cgroups=split (quadlet's default)
    kInCustomSlice = 1u << 5,  // a slice of the admin's own: docker/podman/nerdctl --cgroup-parent=X.slice
};

struct ScopePrefix {
    std::string_view prefix;
    uint32_t runtime;
    bool helper;
    unsigned homes;  // ScopeHome bits
};
// Longer prefixes first: "crio-conmon-" must win over "crio-".
constexpr ScopePrefix kScopes[] = {
    {"cri-containerd-", KEPLERSHM_RUNTIME_CONTAINERD, false, kInPod},
    {"crio-conmon-", KEPLERSHM_RUNTIME_CRIO, true, kInPod},
    {"crio-", KEPLERSHM_RUNTIME_CRIO, false, kInPod},
    {"docker-", KEPLERSHM_RUNTIME_DOCKER, false, kInPod | kInSystemSlice | kRootless | kInService | kInCustomSlice},
    {"libpod-conmon-", KEPLERSHM_RUNTIME_PODMAN, true, kInMachineSlice | kRootless | kInCustomSlice},
    // podman --cgroups=split: the payload in a child of podman's own cgroup (conmon moves to "runtime").
    {"libpod-payload-", KEPLERSHM_RUNTIME_PODMAN, false, kRootless | kInService},
    {"libpod-", KEPLERSHM_RUNTIME_PODMAN, false, kInMachineSlice | kRootless | kInService | kInCustomSlice},
    {"nerdctl-", KEPLERSHM_RUNTIME_CONTAINERD, false, kInSystemSlice | kRootless | kInService | kInCustomSlice},
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
    if (machine.empty()) return false;
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

/// The kind of cgroup the next path component is a child of, as far as workload layouts go. Each place
/// admits the children its owner creates there; anything else leads `elsewhere`, below which nothing
/// names a workload: there cgroups are named by whoever they are delegated to (a service with
/// Delegate=yes, a container with a writable cgroupfs), not by a runtime. A container's own subtree is
/// such a place too, so the first container a path names is the one it belongs to. The places an admin
/// picks for a runtime (a service's own children, a slice or directory of the admin's) admit its names
/// only on the word of the cgroup's owner (WorkloadIdentity::owner_decides): a delegated user could
/// have made them, but cannot make a directory owned by root.
enum class Place {
    root,            // the hierarchy's root
    unanchored,      // after leading "..": a child of an ancestor of the reader's own cgroup
    top_slice,       // another slice at the root: kubelet --cgroup-root=/X puts X-kubepods.slice in X.slice;
                     // an admin's --cgroup-parent=X.slice puts containers there (owner decides)
    sub_slice,       // a slice in a top slice or system-X.slice in /system.slice: --cgroup-parent, services
    service,         // a system service (in /system.slice or a slice above): podman's split payload (owner decides)
    custom_dir,      // another directory at the root: docker's cgroupfs --cgroup-parent=/X (owner decides)
    system_slice,    // /system.slice: docker's and nerdctl's scopes
    machine_slice,   // /machine.slice and its slices (podman pods, libvirt partitions): podman, libvirt VMs
    machine_dir,     // /machine: libvirt's cgroupfs layout
    kube_slice,      // kubepods.slice or a QoS slice in it (systemd driver)
    kube_pod_slice,  // a pod's slice: its containers' scopes
    kube_dir,        // /kubepods or a QoS directory in it (cgroupfs driver)
    kube_pod_dir,    // /kubepods/[<qos>/]pod<uid>: its containers, by bare id or runtime prefix
    docker_dir,      // /docker (cgroupfs driver): containers by bare id
    libpod_parent,   // /libpod_parent (podman's cgroupfs manager): containers and pods
    libpod_pod_dir,  // /libpod_parent/<pod id>: the pod's containers (and its conmon)
    user_slice,      // /user.slice
    user_uid_slice,  // /user.slice/user-<uid>.slice
    user_manager,    // user@<uid>.service and everything below it: delegated to that user
    elsewhere,       // nothing below names a workload
};

struct Walk {
    Place place = Place::root;
    std::string parent;  // the previous component, unescaped; empty for the first one of an unanchored path
    std::string uid;     // decimal, in user_uid_slice and user_manager
    bool owner_decides = false;  // the component just stepped into was claimed on its owner's word
};

/// "<prefix><id>[.scope]" of a runtime that puts its cgroups in `home`: the container it names (or its
/// runtime helper, conmon). Whether it matched.
bool claim_scope(std::string_view c, unsigned home, WorkloadIdentity& id) {
    for (const ScopePrefix& s : kScopes) {
        if ((s.homes & home) == 0 || !starts_with(c, s.prefix)) continue;
        const std::string_view rest = strip(c.substr(s.prefix.size()), ".scope");
        if (!is_container_id(rest)) continue;
        id.runtime = s.runtime;
        id.runtime_helper = s.helper;
        id.container_id = s.helper ? std::string() : std::string(rest);
        return true;
    }
    return false;
}

/// A container named by its bare 64-hex id (cgroupfs layouts: /docker/<id>, /kubepods/.../<id>).
bool claim_bare_id(std::string_view c, uint32_t runtime, WorkloadIdentity& id) {
    if (c.size() != 64 || !is_hex(c)) return false;
    id.container_id = std::string(c);
    id.runtime = runtime;
    id.runtime_helper = false;
    return true;
}

/// A claim in a place of the admin's choosing (a service, a custom slice or directory): who made the
/// cgroup there, root's runtime or a user the subtree is delegated to, only its directory's owner tells.
bool claim_on_owners_word(Walk& walk, bool claimed) {
    walk.owner_decides = claimed;
    return claimed;
}

/// A child of a slice that systemd would name: "<parent stem>-<more>.slice" (systemd names a slice
/// after the slice it is in).
bool extends_slice(std::string_view parent, std::string_view c) {
    const std::string_view stem = strip(parent, ".slice");
    const std::string_view name = strip(c, ".slice");
    return ends_with(c, ".slice") && name.size() > stem.size() + 1 && starts_with(name, stem) && name[stem.size()] == '-';
}

bool is_service(std::string_view c) { return ends_with(c, ".service") && c.size() > 8; }

/// A child of a slice of the admin's (or of /system.slice's own slices): a container put there with
/// --cgroup-parent, a nested slice, or a service.
Place enter_custom_slice(Walk& walk, std::string_view c, WorkloadIdentity& id) {
    if (claim_on_owners_word(walk, claim_scope(c, kInCustomSlice, id))) return Place::elsewhere;
    if (extends_slice(walk.parent, c)) return Place::sub_slice;
    return is_service(c) ? Place::service : Place::elsewhere;
}

/// The digits of "<prefix><uid><suffix>" (user-1000.slice, user@1000.service); empty when `c` is not one.
std::string_view uid_in(std::string_view c, std::string_view prefix, std::string_view suffix) {
    if (!starts_with(c, prefix) || !ends_with(c, suffix) || c.size() <= prefix.size() + suffix.size()) return {};
    const std::string_view digits = c.substr(prefix.size(), c.size() - prefix.size() - suffix.size());
    if (digits.size() > 10 || (digits.size() > 1 && digits[0] == '0')) return {};  // systemd writes no leading zeros
    if (!std::all_of(digits.begin(), digits.end(), [](char d) { return d >= '0' && d <= '9'; })) return {};
    const auto uid = parse_u64(digits);
    return uid && *uid <= UINT32_MAX ? digits : std::string_view();
}

/// A slice of kubelet's systemd hierarchy in `parent` (kubepods.slice or a QoS slice; empty when an
/// unanchored path starts here): a QoS slice or a pod's. systemd names a slice after the slice it is in
/// ("kubepods-burstable.slice" in "kubepods.slice"), so a child that does not extend its parent's name
/// is none of kubelet's.
Place enter_kube_slice(std::string_view parent, std::string_view c, WorkloadIdentity& id) {
    if (!ends_with(c, ".slice")) return Place::elsewhere;
    const std::string_view name = strip(c, ".slice");
    std::string_view stem = strip(parent, ".slice");
    if (parent.empty()) {  // unanchored: the name's own "[<root>-]kubepods" is its stem
        const size_t kubepods = name.find("kubepods");
        if (kubepods == std::string_view::npos) return Place::elsewhere;
        stem = name.substr(0, kubepods + 8);
        if (name == stem) return Place::kube_slice;
    }
    if (name.size() <= stem.size() + 1 || !starts_with(name, stem) || name[stem.size()] != '-') return Place::elsewhere;
    std::string_view rest = name.substr(stem.size() + 1);
    for (std::string_view qos : {std::string_view("besteffort"), std::string_view("burstable")}) {
        if (!id.qos.empty() || !starts_with(rest, qos)) continue;
        if (rest == qos) {
            id.qos = std::string(qos);
            return Place::kube_slice;
        }
        if (parent.empty() && rest.size() > qos.size() && rest[qos.size()] == '-') {  // "kubepods-<qos>-pod<uid>"
            id.qos = std::string(qos);
            rest = rest.substr(qos.size() + 1);
        }
    }
    if (!starts_with(rest, "pod") || !is_pod_uid(rest.substr(3))) return Place::elsewhere;
    id.pod_uid = std::string(rest.substr(3));
    std::replace(id.pod_uid.begin(), id.pod_uid.end(), '_', '-');
    return Place::kube_pod_slice;
}

/// A child of /kubepods or of its QoS directory (cgroupfs driver): a QoS directory or a pod's.
Place enter_kube_dir(std::string_view c, WorkloadIdentity& id) {
    if ((c == "besteffort" || c == "burstable") && id.qos.empty()) {
        id.qos = std::string(c);
        return Place::kube_dir;
    }
    if (!starts_with(c, "pod") || !is_pod_uid(c.substr(3))) return Place::elsewhere;
    id.pod_uid = std::string(c.substr(3));
    std::replace(id.pod_uid.begin(), id.pod_uid.end(), '_', '-');  // the API server's spelling, as for slices
    return Place::kube_pod_dir;
}

/// podman's cgroupfs manager puts a container in /libpod_parent/libpod-<id>, a pod in
/// /libpod_parent/<pod id>: its containers below it in libpod-<container id> (which then clears this), its
/// conmon processes in /libpod_parent/<pod id>/conmon. The pod id names no container: what runs there
/// is the runtime.
Place enter_libpod_parent(std::string_view c, WorkloadIdentity& id) {
    if (claim_scope(c, kInMachineSlice, id)) return Place::elsewhere;
    if (c.size() != 64 || !is_hex(c)) return Place::elsewhere;
    id.runtime = KEPLERSHM_RUNTIME_PODMAN;
    id.runtime_helper = true;
    id.container_id.clear();
    return Place::libpod_pod_dir;
}

Place enter_from_root(std::string_view c) {
    if (c == "kubepods.slice") return Place::kube_slice;
    if (c == "kubepods") return Place::kube_dir;
    if (c == "system.slice") return Place::system_slice;
    if (c == "machine.slice") return Place::machine_slice;
    if (c == "machine") return Place::machine_dir;
    if (c == "docker") return Place::docker_dir;
    if (c == "libpod_parent") return Place::libpod_parent;
    if (c == "user.slice") return Place::user_slice;
    if (ends_with(c, ".slice")) return Place::top_slice;
    // systemd puts only slices and init.scope at the root: any other directory is an admin's (cgroupfs).
    return ends_with(c, ".scope") || ends_with(c, ".service") ? Place::elsewhere : Place::custom_dir;
}

/// The first component after leading "..". The kernel writes those for a cgroup outside the reader's
/// cgroup namespace (the collector in a container of its own): the path goes up to a common ancestor of
/// the two cgroups, then down. That ancestor is an ancestor of the collector's own cgroup, so its
/// children are the host's, made by root or kubelet (the collector does not run in a cgroup delegated
/// to a user or a container): whichever layout this component belongs to, it is where that layout puts it.
Place enter_unanchored(Walk& walk, std::string_view c, WorkloadIdentity& id) {
    if (c == "kubepods") return Place::kube_dir;
    if (c.find("kubepods") != std::string_view::npos) return enter_kube_slice({}, c, id);
    if (const Place p = enter_from_root(c); p != Place::elsewhere && p != Place::top_slice && p != Place::custom_dir) return p;
    if (claim_scope(c, kInPod | kInSystemSlice | kInMachineSlice, id) || claim_bare_id(c, KEPLERSHM_RUNTIME_UNKNOWN, id) ||
        parse_libvirt_machine(c, id)) {
        return Place::elsewhere;
    }
    if (const Place p = enter_kube_dir(c, id); p != Place::elsewhere) return p;
    if (starts_with(c, "machine-") && ends_with(c, ".slice")) return Place::machine_slice;
    if (const std::string_view uid = uid_in(c, "user-", ".slice"); !uid.empty()) {
        walk.uid = std::string(uid);
        return Place::user_uid_slice;
    }
    if (const std::string_view uid = uid_in(c, "user@", ".service"); !uid.empty()) {
        walk.uid = std::string(uid);
        return Place::user_manager;
    }
    return ends_with(c, ".slice") ? Place::top_slice : Place::elsewhere;
}

/// Below user@<uid>.service the user names cgroups as it likes: a runtime prefix there is that user's
/// rootless container, at any depth (podman puts it in user.slice, other runtimes elsewhere), and keeps
/// the uid so that it is never taken for a system container (owned_container_id).
Place enter_user_manager(const Walk& walk, std::string_view c, WorkloadIdentity& id) {
    if (!claim_scope(c, kRootless, id)) return Place::user_manager;
    id.rootless_uid = static_cast<uint32_t>(parse_u64(walk.uid).value_or(0));
    return Place::elsewhere;
}

/// Where child `c` of the walk's place leads, and what it says of the workload.
Place step(Walk& walk, std::string_view c, WorkloadIdentity& id) {
    switch (walk.place) {
        case Place::root: return enter_from_root(c);
        case Place::unanchored: return enter_unanchored(walk, c, id);
        case Place::top_slice:
            if (strip(c, ".slice") == std::string(strip(walk.parent, ".slice")) + "-kubepods") return Place::kube_slice;
            return enter_custom_slice(walk, c, id);
        case Place::sub_slice: return enter_custom_slice(walk, c, id);
        case Place::service: claim_on_owners_word(walk, claim_scope(c, kInService, id)); return Place::elsewhere;
        case Place::custom_dir:
            claim_on_owners_word(walk, claim_bare_id(c, KEPLERSHM_RUNTIME_UNKNOWN, id));
            return Place::elsewhere;
        case Place::system_slice:
            if (claim_scope(c, kInSystemSlice, id)) return Place::elsewhere;
            if (extends_slice("system.slice", c)) return Place::sub_slice;  // template units' system-X.slice
            return is_service(c) ? Place::service : Place::elsewhere;
        case Place::machine_slice:
            if (claim_scope(c, kInMachineSlice, id) || parse_libvirt_machine(c, id)) return Place::elsewhere;
            return starts_with(c, "machine-") && ends_with(c, ".slice") ? Place::machine_slice : Place::elsewhere;
        case Place::machine_dir: parse_libvirt_machine(c, id); return Place::elsewhere;
        case Place::kube_slice: return enter_kube_slice(walk.parent, c, id);
        case Place::kube_pod_slice: claim_scope(c, kInPod, id); return Place::elsewhere;
        case Place::kube_dir: return enter_kube_dir(c, id);
        case Place::kube_pod_dir:
            if (!claim_bare_id(c, KEPLERSHM_RUNTIME_UNKNOWN, id)) claim_scope(c, kInPod, id);
            return Place::elsewhere;
        case Place::docker_dir: claim_bare_id(c, KEPLERSHM_RUNTIME_DOCKER, id); return Place::elsewhere;
        case Place::libpod_parent: return enter_libpod_parent(c, id);
        case Place::libpod_pod_dir: claim_scope(c, kInMachineSlice, id); return Place::elsewhere;
        case Place::user_slice:
            walk.uid = std::string(uid_in(c, "user-", ".slice"));
            return walk.uid.empty() ? Place::elsewhere : Place::user_uid_slice;
        case Place::user_uid_slice: return uid_in(c, "user@", ".service") == walk.uid ? Place::user_manager : Place::elsewhere;
        case Place::user_manager: return enter_user_manager(walk, c, id);
        case Place::elsewhere: return Place::elsewhere;
    }
    return Place::elsewhere;
}

/// The workload kind the identified parts make.
void settle_kind(WorkloadIdentity& id) {
    if (!id.pod_uid.empty()) {
        id.kind = KEPLERSHM_WORKLOAD_POD;
        if (id.qos.empty()) id.qos = "guaranteed";  // guaranteed pods sit directly under kubepods
    } else if (!id.container_id.empty() || id.runtime_helper) {
        id.kind = KEPLERSHM_WORKLOAD_CONTAINER;
    } else if (id.kind != KEPLERSHM_WORKLOAD_VM) {
        id = WorkloadIdentity{};  // a QoS directory without a pod says nothing either
    }
}

}  // namespace

WorkloadIdentity identify_cgroup_path(std::string_view path) {
    WorkloadIdentity id;
    if (path.size() > kMaxPathBytes) return id;
    const std::vector<std::string_view> components = split_fields(path, "/");
    size_t first = 0;
    while (first < components.size() && components[first] == "..") ++first;
    Walk walk;
    walk.place = first > 0 ? Place::unanchored : Place::root;
    for (size_t i = first; i < components.size(); ++i) {
        if (components[i] == "." || components[i] == "..") return WorkloadIdentity{};  // no path the kernel writes
        if (walk.place == Place::elsewhere) continue;
        std::string c = systemd_unescape(components[i]);
        walk.place = step(walk, c, id);
        walk.parent = std::move(c);
        if (walk.owner_decides) {  // the container's own directory, as the path spells it
            id.owner_decides = std::string(path.substr(0, static_cast<size_t>(components[i].data() - path.data()) + components[i].size()));
            walk.owner_decides = false;
        }
    }
    settle_kind(id);
    return id;
}

WorkloadIdentity decide_by_owner(WorkloadIdentity id, std::optional<uint32_t> owner_uid) {
    if (id.owner_decides.empty()) return id;
    if (!owner_uid) return WorkloadIdentity{};
    if (*owner_uid != 0) id.rootless_uid = *owner_uid;
    id.owner_decides.clear();
    return id;
}

std::string owned_container_id(std::string_view container_id, std::optional<uint32_t> rootless_uid) {
    if (!rootless_uid || container_id.empty()) return std::string(container_id);
    return "uid" + std::to_string(*rootless_uid) + "-" + std::string(container_id);
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

}  // namespace kepler::collect
