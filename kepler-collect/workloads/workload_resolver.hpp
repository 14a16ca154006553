// workload_resolver.hpp — which workload (container, pod, VM, system service, kernel) a process
// belongs to: its cgroup read from /proc/<pid>/cgroup, identified by cgroup_identity, with the cgroup
// id from the cgroup directory's inode and VM names from qemu command lines.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sources/process_source.hpp"
#include "workloads/cgroup_identity.hpp"
#include "workloads/container_names.hpp"

namespace kepler::collect {

/// A cgroup as the frame's workload table needs it.
struct CgroupWorkload {
    std::string path;
    WorkloadIdentity identity;
    uint64_t cgroup_id = 0;  // cgroup v2 id (= inode of its directory), else the v1 directory's inode
};

/// Where each cgroup hierarchy is mounted, from /proc/self/mountinfo.
struct CgroupMounts {
    std::string unified;                                  // cgroup2 mount point, "" if none
    std::unordered_map<std::string, std::string> by_controller;  // "cpu" → "/sys/fs/cgroup/cpu,cpuacct"
    /// Mount points that show a subtree of their hierarchy (mountinfo's root is not "/"), where the mount
    /// point joined with a cgroup path is not that cgroup's directory.
    std::unordered_set<std::string> subtree;
};
/// Parses mountinfo text (mount points with \040-style escapes decoded).
[[nodiscard]] CgroupMounts parse_cgroup_mounts(std::string_view mountinfo);

/// Caches one resolution per process; re-resolves when the eBPF source reports another cgroup id
/// (the process moved) and every `refresh_samples` samples. A process already gone from /proc gets the
/// workload last seen for its cgroup id. podman containers are named from their conmon's command line:
/// learned when a conmon process is resolved (a new container's conmon is in the sample that sees it
/// start), and by a scan of /proc for conmon processes when a podman container has no name yet (at
/// most once per `refresh_samples` samples; after a restart the conmons may be idle for hours). docker
/// containers are named from `docker_data_root`/containers/<id>/config.v2.json, read once per container.
/// A rootless container (below user@<uid>.service) is published as owned_container_id(), "uid<uid>-<id>",
/// and named only by that user's conmons, never from the system dockerd's files. Where only a cgroup's
/// owner tells whose container it is (WorkloadIdentity::owner_decides: podman's payload in a service,
/// a --cgroup-parent of the admin's), the resolver asks the cgroup directory's owner (cgroup_owner).
/// Not thread-safe.
class WorkloadResolver {
public:
    static constexpr uint32_t kDefaultRefreshSamples = 30;

    explicit WorkloadResolver(std::string proc_root = "/proc", uint32_t refresh_samples = kDefaultRefreshSamples,
                              const std::string& docker_data_root = "/var/lib/docker");

    /// The workload of a process in this sample; fills p.cgroup_id when the source did not know it.
    std::shared_ptr<const CgroupWorkload> resolve(ProcessActivity& p);
    /// Ends a sample: forgets processes not resolved for a while.
    void end_sample();

private:
    std::shared_ptr<const CgroupWorkload> read_workload(const ProcessActivity& p);
    /// Names the container of `identity` (podman, docker) or notes that a scan is wanted (podman).
    void name_container(WorkloadIdentity& identity);
    /// Scans for names when one is missing and a scan is due; re-resolves unnamed containers when a
    /// name was learned.
    void update_names();
    uint64_t cgroup_inode(const std::vector<CgroupLine>& lines, const ChosenCgroup& chosen) const;
    /// Who made the directory of `chosen.identity.owner_decides` in the hierarchy `chosen` was read from:
    /// the owner of its parent directory (only they, or root, can make one there); nothing when either
    /// cannot be read.
    std::optional<uint32_t> cgroup_owner(const ChosenCgroup& chosen) const;
    /// A comm that a VMM's process may have (the command line is read only for these).
    static bool may_run_a_vm(std::string_view comm);
    /// Names the VM a VMM process runs (vm_id, vm_name, runtime) from its command line, when it runs one.
    void name_vm(const ProcessKey& key, const std::string& base, WorkloadIdentity& identity) const;

    struct Cached {
        std::shared_ptr<const CgroupWorkload> workload;
        uint64_t source_cgroup_id = 0;
        uint64_t resolved_at = 0;
        uint64_t used_at = 0;
        bool stale = false;  // re-resolve at the next sight (a name was learned for its container)
    };
    std::string proc_root_;
    uint32_t refresh_samples_;
    CgroupMounts mounts_;
    std::shared_ptr<const CgroupWorkload> kernel_;
    std::unordered_map<ProcessKey, Cached, ProcessKeyHash> cache_;
    // Workloads by the cgroup id the eBPF source reports: a process that is gone from /proc before
    // we looked (short-lived commands in containers) still finds the workload of its cgroup.
    std::unordered_map<uint64_t, std::shared_ptr<const CgroupWorkload>> by_cgroup_id_;
    uint64_t sample_ = 0;
    ContainerNames names_;
    DockerNames docker_names_;
    bool name_missing_ = false;   // this sample resolved a podman container without a name
    bool name_learned_ = false;   // a conmon resolved this sample named a container anew
    std::optional<uint64_t> last_scan_;
};

}  // namespace kepler::collect
