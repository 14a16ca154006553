#include "workloads/workload_resolver.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/text_io.hpp"
#include "workloads/vm_identity.hpp"

namespace kepler::collect {

namespace {

/// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_octal(std::string_view text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 3 < text.size()) {
            const std::string_view digits = text.substr(i + 1, 3);
            if (digits.size() == 3 && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '7'; })) {
                out.push_back(static_cast<char>(std::stoi(std::string(digits), nullptr, 8)));
                i += 3;
                continue;
            }
        }
        out.push_back(text[i]);
    }
    return out;
}

uint64_t inode_of(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

CgroupMounts parse_cgroup_mounts(std::string_view mountinfo) {
    CgroupMounts mounts;
    for (std::string_view line : split_lines(mountinfo)) {
        const size_t dash = line.find(" - ");
        if (dash == std::string_view::npos) continue;
        const std::vector<std::string_view> left = split_fields(line.substr(0, dash));
        const std::vector<std::string_view> right = split_fields(line.substr(dash + 3));
        if (left.size() < 5 || right.size() < 3) continue;
        const std::string mount_point = unescape_octal(left[4]);
        if ((right[0] == "cgroup2" || right[0] == "cgroup") && left[3] != "/") mounts.subtree.insert(mount_point);
        if (right[0] == "cgroup2") {
            if (mounts.unified.empty()) mounts.unified = mount_point;
        } else if (right[0] == "cgroup") {
            for (std::string_view option : split_fields(right[2], ",")) {
                if (option == "rw" || option == "ro" || starts_with(option, "release_agent")) continue;
                mounts.by_controller.try_emplace(std::string(option), mount_point);
            }
        }
    }
    return mounts;
}

WorkloadResolver::WorkloadResolver(std::string proc_root, uint32_t refresh_samples, const std::string& docker_data_root)
    : proc_root_(std::move(proc_root)),
      refresh_samples_(refresh_samples == 0 ? 1 : refresh_samples),
      names_(proc_root_),
      docker_names_(docker_data_root + "/containers") {
    mounts_ = parse_cgroup_mounts(read_text_file(proc_root_ + "/self/mountinfo", 1 << 20).text);
    auto kernel = std::make_shared<CgroupWorkload>();
    kernel->path.push_back('/');  // (not = "/": GCC 12 -Wrestrict false positive)
    kernel->identity.kind = KEPLERSHM_WORKLOAD_KERNEL;
    kernel_ = std::move(kernel);
}

std::shared_ptr<const CgroupWorkload> WorkloadResolver::resolve(ProcessActivity& p) {
    if (p.flags & KEPLERSHM_PROC_KERNEL) return kernel_;
    Cached& c = cache_[p.key];
    const bool moved = p.cgroup_id != 0 && c.source_cgroup_id != 0 && p.cgroup_id != c.source_cgroup_id;
    if (!c.workload || moved || c.stale || sample_ - c.resolved_at >= refresh_samples_) {
        if (auto fresh = read_workload(p)) {
            c.workload = std::move(fresh);
            if (p.cgroup_id != 0) by_cgroup_id_[p.cgroup_id] = c.workload;
        } else if (!c.workload || moved) {  // gone from /proc: its cgroup may still be known
            if (const auto known = by_cgroup_id_.find(p.cgroup_id); p.cgroup_id != 0 && known != by_cgroup_id_.end()) {
                c.workload = known->second;
            }
        }
        c.resolved_at = sample_;
        c.source_cgroup_id = p.cgroup_id;
        c.stale = false;
    }
    c.used_at = sample_;
    if (p.cgroup_id == 0 && c.workload) p.cgroup_id = c.workload->cgroup_id;
    return c.workload;
}

void WorkloadResolver::end_sample() {
    update_names();
    ++sample_;
    if (sample_ % 64 != 0) return;
    std::erase_if(cache_, [&](const auto& item) { return sample_ - item.second.used_at > 2 * refresh_samples_; });
    if (by_cgroup_id_.size() > 65536) by_cgroup_id_.clear();  // bound it; live cgroups are learned again
}

void WorkloadResolver::name_container(WorkloadIdentity& identity) {
    if (identity.container_id.empty() || !identity.container_name.empty()) return;
    if (identity.runtime == KEPLERSHM_RUNTIME_DOCKER) {
        // The data root is the system dockerd's: a rootless dockerd keeps its containers elsewhere, and a
        // user's scope named after a system container must not take that container's name.
        if (identity.rootless_uid) return;
        if (const std::string* name = docker_names_.find(identity.container_id)) identity.container_name = *name;
        return;
    }
    if (identity.runtime != KEPLERSHM_RUNTIME_PODMAN) return;
    if (const std::string* name = names_.find(identity.container_id, identity.rootless_uid)) {
        identity.container_name = *name;
    } else {
        name_missing_ = true;
    }
}

void WorkloadResolver::update_names() {
    const bool scan_due = !last_scan_ || sample_ - *last_scan_ >= refresh_samples_;
    if (name_missing_ && scan_due) {
        name_learned_ = names_.scan() || name_learned_;
        last_scan_ = sample_;
    }
    if (name_learned_) {  // re-resolve the unnamed at their next sight rather than in refresh_samples_
        for (auto& [key, cached] : cache_) {
            const WorkloadIdentity* id = cached.workload ? &cached.workload->identity : nullptr;
            if (id != nullptr && id->runtime == KEPLERSHM_RUNTIME_PODMAN && id->container_name.empty()) {
                cached.stale = true;
            }
        }
    }
    name_missing_ = name_learned_ = false;
}

std::shared_ptr<const CgroupWorkload> WorkloadResolver::read_workload(const ProcessActivity& p) {
    const std::string base = fmt::format("{}/{}", proc_root_, p.key.pid);
    const ReadResult cgroup = read_text_file(base + "/cgroup", 64 * 1024);
    if (!cgroup.ok()) return nullptr;
    const std::vector<CgroupLine> lines = parse_proc_cgroup(cgroup.text);
    ChosenCgroup chosen = choose_cgroup(lines);
    if (!chosen.identity.owner_decides.empty()) chosen.identity = decide_by_owner(std::move(chosen.identity), cgroup_owner(chosen));

    auto w = std::make_shared<CgroupWorkload>();
    w->cgroup_id = cgroup_inode(lines, chosen);
    w->path = std::move(chosen.path);
    w->identity = std::move(chosen.identity);

    const std::string_view comm(p.comm.data(), strnlen(p.comm.data(), p.comm.size()));
    if (comm == "conmon") name_learned_ = names_.learn_process(p.key.pid) || name_learned_;
    name_container(w->identity);
    // Published under its owner: a user can name a scope after any container (owned_container_id).
    w->identity.container_id = owned_container_id(w->identity.container_id, w->identity.rootless_uid);

    if (w->identity.kind == KEPLERSHM_WORKLOAD_VM || may_run_a_vm(comm)) name_vm(p.key, base, w->identity);
    return w;
}

bool WorkloadResolver::may_run_a_vm(std::string_view comm) {
    // comm is cut at 15 bytes ("qemu-system-x86", "cloud-hyperviso"); the command line decides.
    for (const std::string_view vmm : {"qemu", "kvm", "firecracker", "cloud-hyperviso", "VBoxHeadless", "VirtualBoxVM", "vmware-vmx"}) {
        if (starts_with(comm, vmm)) return true;
    }
    return false;
}

void WorkloadResolver::name_vm(const ProcessKey& key, const std::string& base, WorkloadIdentity& identity) const {
    const std::string cmdline = read_text_file(base + "/cmdline", 256 * 1024).text;
    const std::optional<VmProcess> vm = identify_vm_process(cmdline);
    if (!vm) return;
    // A host's VMM is the VM; libvirt's scope said so already and keeps its runtime. A VMM inside a
    // container or pod (KubeVirt's virt-launcher) stays that container's, with the VM's names beside it.
    if (identity.kind == KEPLERSHM_WORKLOAD_SYSTEM) identity.kind = KEPLERSHM_WORKLOAD_VM;
    if (identity.runtime == KEPLERSHM_RUNTIME_UNKNOWN) identity.runtime = vm->runtime;
    if (!vm->name.empty()) identity.vm_name = vm->name;
    if (!vm->id.empty()) identity.vm_id = vm->id;
    if (identity.vm_id.empty()) identity.vm_id = derived_vm_id(cmdline, key.pid, key.start_time_ticks);
    if (identity.vm_name.empty()) identity.vm_name = default_vm_name(vm->runtime, identity.vm_id);  // not a container runtime's
}

std::optional<uint32_t> WorkloadResolver::cgroup_owner(const ChosenCgroup& chosen) const {
    const std::string& cgroup = chosen.identity.owner_decides;
    // "/../.." paths (a cgroup outside the collector's cgroup namespace) lie outside its cgroupfs mount:
    // joined to the mount point they would name some other file. Unknown, so the claim names nothing.
    const std::vector<std::string_view> components = split_fields(cgroup, "/");
    if (cgroup.empty() || cgroup[0] != '/' ||
        std::any_of(components.begin(), components.end(), [](std::string_view c) { return c == "." || c == ".."; })) {
        return std::nullopt;
    }
    std::string mount = chosen.controllers.empty() ? mounts_.unified : std::string();
    for (std::string_view controller : split_fields(chosen.controllers, ",")) {  // the hierarchy it was read from
        if (const auto m = mounts_.by_controller.find(std::string(controller)); m != mounts_.by_controller.end()) {
            mount = m->second;
            break;
        }
    }
    if (mount.empty() || mounts_.subtree.count(mount) != 0) return std::nullopt;
    // Whoever made the directory decides, and only the owner of its parent (or root) can make one there:
    // the parent's owner. Not the directory's own: a runtime may hand a container's cgroup to the uid its
    // user namespace maps to root (crun on cgroup v2, e.g. podman's --userns=auto), which would name a
    // subordinate uid, not the container's owner. Not following a last symbolic link: cgroupfs has none,
    // and another file's owner says nothing. A process gone, or a cgroup this mount does not show, leaves
    // the owner unknown (names nothing).
    struct stat st {};
    if (::fstatat(AT_FDCWD, (mount + cgroup).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
    const std::string parent = mount + cgroup.substr(0, cgroup.find_last_of('/'));
    if (::fstatat(AT_FDCWD, parent.empty() ? "/" : parent.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
        return std::nullopt;
    }
    return static_cast<uint32_t>(st.st_uid);
}

uint64_t WorkloadResolver::cgroup_inode(const std::vector<CgroupLine>& lines, const ChosenCgroup& chosen) const {
    // The eBPF helper reports cgroup v2 ids, so v2 wins whenever it is mounted.
    if (!mounts_.unified.empty()) {
        for (const CgroupLine& l : lines) {
            if (l.hierarchy == 0 && l.controllers.empty()) return inode_of(mounts_.unified + l.path);
        }
    }
    for (std::string_view controller : split_fields(chosen.controllers, ",")) {
        const auto m = mounts_.by_controller.find(std::string(controller));
        if (m != mounts_.by_controller.end()) return inode_of(m->second + chosen.path);
    }
    return 0;
}

}  // namespace kepler::collect
