// workload_resolver.hpp — which workload (container, pod, VM, system service, kernel) a process
// belongs to: its cgroup read from /proc/<pid>/cgroup, identified by cgroup_identity, with the cgroup
// id from the cgroup directory's inode and VM names from qemu command lines.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sources/process_source.hpp"
#include "workloads/cgroup_identity.hpp"

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
};
/// Parses mountinfo text (mount points with \040-style escapes decoded).
[[nodiscard]] CgroupMounts parse_cgroup_mounts(std::string_view mountinfo);

/// Caches one resolution per process; re-resolves when the eBPF source reports another cgroup id
/// (the process moved) and every `refresh_samples` samples. A process already gone from /proc gets the
/// workload last seen for its cgroup id. Not thread-safe.
class WorkloadResolver {
public:
    explicit WorkloadResolver(std::string proc_root = "/proc", uint32_t refresh_samples = 30);

    /// The workload of a process in this sample; fills p.cgroup_id when the source did not know it.
    std::shared_ptr<const CgroupWorkload> resolve(ProcessActivity& p);
    /// Ends a sample: forgets processes not resolved for a while.
    void end_sample();

private:
    std::shared_ptr<const CgroupWorkload> read_workload(const ProcessActivity& p) const;
    uint64_t cgroup_inode(const std::vector<CgroupLine>& lines, const ChosenCgroup& chosen) const;

    struct Cached {
        std::shared_ptr<const CgroupWorkload> workload;
        uint64_t source_cgroup_id = 0;
        uint64_t resolved_at = 0;
        uint64_t used_at = 0;
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
};

}  // namespace kepler::collect
