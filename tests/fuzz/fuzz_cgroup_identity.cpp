// libFuzzer: cgroup paths and /proc/<pid>/cgroup files (kepler-collect/workloads/cgroup_identity.cpp). Any
// bytes, read as one path and as a whole file: the identity found is one the collector could publish —
// ids are hex of the parser's lengths and taken from the path, a pod has a UID and a QoS class, a
// rootless container names its user's manager, nothing at all is named where the path has "." or ".."
// after its first ordinary component.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/text_io.hpp"
#include "workloads/cgroup_identity.hpp"

namespace {

using namespace kepler::collect;

void require(bool holds) {
    if (!holds) __builtin_trap();
}

bool has_dot_after_first_component(std::string_view path) {
    const auto components = split_fields(path, "/");
    size_t i = 0;
    while (i < components.size() && components[i] == "..") ++i;
    return std::any_of(components.begin() + static_cast<std::ptrdiff_t>(i), components.end(),
                       [](std::string_view c) { return c == "." || c == ".."; });
}

/// What every identity of `path` must satisfy.
void check_identity(std::string_view path, const WorkloadIdentity& id) {
    const std::string unescaped = systemd_unescape(path);
    require(unescaped.size() <= path.size());
    require(id.container_id.empty() || is_container_id(id.container_id));
    require(id.container_id.empty() || unescaped.find(id.container_id) != std::string::npos);
    require(!id.runtime_helper || id.container_id.empty());
    require(id.pod_uid.size() <= 64 && std::all_of(id.pod_uid.begin(), id.pod_uid.end(), [](char c) {
                return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-';
            }));
    switch (id.kind) {
        case KEPLERSHM_WORKLOAD_POD:
            require(!id.pod_uid.empty() && !id.rootless_uid);
            require(id.qos == "guaranteed" || id.qos == "burstable" || id.qos == "besteffort");
            break;
        case KEPLERSHM_WORKLOAD_CONTAINER:
            require(id.pod_uid.empty() && (!id.container_id.empty() || id.runtime_helper));
            require(id.runtime != KEPLERSHM_RUNTIME_UNKNOWN || !id.container_id.empty());
            break;
        case KEPLERSHM_WORKLOAD_VM:
            require(id.runtime == KEPLERSHM_RUNTIME_LIBVIRT && !id.vm_id.empty() && id.container_id.empty());
            break;
        case KEPLERSHM_WORKLOAD_SYSTEM:
            require(id.container_id.empty() && id.pod_uid.empty() && id.qos.empty() && !id.runtime_helper);
            require(id.runtime == KEPLERSHM_RUNTIME_UNKNOWN && !id.rootless_uid && id.vm_id.empty());
            break;
        default: require(false);
    }
    if (id.rootless_uid) {
        require(id.kind == KEPLERSHM_WORKLOAD_CONTAINER);
        require(unescaped.find("user@" + std::to_string(*id.rootless_uid) + ".service") != std::string::npos);
        // A rootless container is never published under an id a system container could have.
        require(id.container_id.empty() || !is_container_id(owned_container_id(id.container_id, id.rootless_uid)));
    } else {
        require(owned_container_id(id.container_id, id.rootless_uid) == id.container_id);
    }
    if (has_dot_after_first_component(path)) require(id.kind == KEPLERSHM_WORKLOAD_SYSTEM);
    if (path.size() > 4096) require(id.kind == KEPLERSHM_WORKLOAD_SYSTEM);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    check_identity(text, identify_cgroup_path(text));

    const std::vector<CgroupLine> lines = parse_proc_cgroup(text);
    require(lines.size() <= 64);
    for (const CgroupLine& line : lines) require(!line.path.empty() && line.path[0] == '/' && line.path.size() <= 4096);
    const ChosenCgroup chosen = choose_cgroup(lines);
    require(!chosen.path.empty() && chosen.path[0] == '/');
    check_identity(chosen.path, chosen.identity);
    require(std::any_of(lines.begin(), lines.end(), [&](const CgroupLine& l) { return l.path == chosen.path; }) ||
            chosen.path == "/");
    return 0;
}
