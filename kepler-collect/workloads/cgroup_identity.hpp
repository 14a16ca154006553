// cgroup_identity.hpp — from a process's cgroup paths to the workload it belongs to: container id and
// runtime (docker, containerd, cri-o, podman), Kubernetes pod UID and QoS class, libvirt/qemu VM.
// Pure text functions: tests feed them paths captured from real nodes of each runtime.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "keplershm.h"

namespace kepler::collect {

/// Whether `text` is a container id as this parser extracts them from cgroup paths (12 to 128 hex
/// digits; runtimes write 64). Other sources of ids (conmon's command line) are held to the same rule,
/// since their ids are matched against these.
[[nodiscard]] bool is_container_id(std::string_view text) noexcept;

/// One line of /proc/<pid>/cgroup: "hierarchy-ID:controller-list:path".
struct CgroupLine {
    uint32_t hierarchy = 0;
    std::string controllers;  // empty for the v2 unified hierarchy ("0::/...")
    std::string path;
};

/// Parses /proc/<pid>/cgroup. Malformed lines are skipped; at most 64 lines and 4096-byte paths.
[[nodiscard]] std::vector<CgroupLine> parse_proc_cgroup(std::string_view text);

struct WorkloadIdentity {
    uint32_t kind = KEPLERSHM_WORKLOAD_SYSTEM;     // enum keplershm_workload_kind
    uint32_t runtime = KEPLERSHM_RUNTIME_UNKNOWN;  // enum keplershm_runtime
    std::string container_id;                      // without runtime prefix ("docker-", "cri-containerd-")
                                                   // (for rootless_uid, the id its owner's runtime knows)
    std::string container_name;                    // the runtime's own name (podman), when it is known
    std::string pod_uid;                           // dashed form, as the API server spells it
    std::string qos;                               // "guaranteed", "burstable" or "besteffort" (pods only)
    std::string vm_name;
    std::string vm_id;                             // qemu -uuid when known, else the libvirt machine name
    bool runtime_helper = false;                   // conmon: belongs to the pod/container, runs no workload
    /// Set for a container found below user@<uid>.service: a rootless runtime's, named by that user (who
    /// can name a cgroup there anything), so published as owned_container_id(), never as a system one.
    /// Also set by decide_by_owner() for a container whose cgroup directory a user owns.
    std::optional<uint32_t> rootless_uid;
    /// Set where the path alone cannot tell who named the container: a runtime's name in a place the admin
    /// chooses (a child of a system service, a slice of the admin's, a directory at the root), which a
    /// user with a delegated subtree there could also have made. It is the container's cgroup (a prefix
    /// of the path identified), whose directory's owner decides; until decide_by_owner() has heard it,
    /// the identity must not be published.
    std::string owner_decides;
};

/// Identifies one cgroup path (either hierarchy). Kubernetes with the systemd or cgroupfs driver, every
/// QoS class; docker, containerd (cri and nerdctl), cri-o, podman (rootful and rootless); libvirt
/// machine.slice scopes (systemd \xNN escapes decoded) and the libvirt cgroupfs layout.
/// A name is believed only where its runtime puts it (a docker scope directly in /system.slice, a
/// pod's slice in kubelet's hierarchy from the root, ...): below a user's manager or a container,
/// cgroups are named by whoever they are delegated to. In the places an admin chooses (a runtime's
/// name as a child of a system service, in a slice of the admin's, a bare id in a directory at the
/// root) the claim is conditional: owner_decides names the cgroup whose owner decides. A path with "." or ".."
/// after its first ordinary component is no path the kernel writes and names nothing; leading ".."
/// (a cgroup namespace's view of cgroups outside it) start below an ancestor of the reader's cgroup.
[[nodiscard]] WorkloadIdentity identify_cgroup_path(std::string_view path);

/// A conditional identity (owner_decides) settled by who made that cgroup's directory (the resolver asks
/// the owner of its parent): root's is the system's container, another uid's is that user's rootless
/// container (rootless_uid), and an owner not known (a directory could not be read) names nothing. Other identities are returned as they are.
[[nodiscard]] WorkloadIdentity decide_by_owner(WorkloadIdentity id, std::optional<uint32_t> owner_uid);

/// The id a container is published and named by: its runtime's id for the system's runtimes,
/// "uid<uid>-<id>" for a rootless one, which no hex id of a system container (or another user's) can equal.
[[nodiscard]] std::string owned_container_id(std::string_view container_id, std::optional<uint32_t> rootless_uid);

/// The path to identify a process by, and what it says: the first of v2, v1 cpu, v1 name=systemd and
/// the other v1 hierarchies that names a workload; else the most specific path (v2 unless it is "/").
struct ChosenCgroup {
    std::string path;
    std::string controllers;  // of the hierarchy the path was taken from; empty for v2
    WorkloadIdentity identity;
};
[[nodiscard]] ChosenCgroup choose_cgroup(const std::vector<CgroupLine>& lines);

/// Decodes systemd unit-name escapes ("\x2d" → "-").
[[nodiscard]] std::string systemd_unescape(std::string_view text);

}  // namespace kepler::collect
