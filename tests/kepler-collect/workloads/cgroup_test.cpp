// Workload identity from cgroup paths captured on real nodes of each runtime and QoS class
// (fixtures/cgroup_paths.tsv), whole /proc/<pid>/cgroup files of v1, v2 and hybrid hosts, qemu
// command lines and mountinfo.
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/text_io.hpp"
#include "test_support.hpp"
#include "workloads/cgroup_identity.hpp"
#include "workloads/workload_resolver.hpp"

namespace kepler::collect {
namespace {

using testing::fixture;

uint32_t kind_named(std::string_view name) {
    if (name == "pod") return KEPLERSHM_WORKLOAD_POD;
    if (name == "container") return KEPLERSHM_WORKLOAD_CONTAINER;
    if (name == "vm") return KEPLERSHM_WORKLOAD_VM;
    return KEPLERSHM_WORKLOAD_SYSTEM;
}

uint32_t runtime_named(std::string_view name) {
    if (name == "docker") return KEPLERSHM_RUNTIME_DOCKER;
    if (name == "containerd") return KEPLERSHM_RUNTIME_CONTAINERD;
    if (name == "crio") return KEPLERSHM_RUNTIME_CRIO;
    if (name == "podman") return KEPLERSHM_RUNTIME_PODMAN;
    if (name == "libvirt") return KEPLERSHM_RUNTIME_LIBVIRT;
    return KEPLERSHM_RUNTIME_UNKNOWN;
}

std::string dash_is_empty(std::string_view field) { return field == "-" ? std::string() : std::string(field); }

TEST(CgroupIdentity, RealPathSamplesOfEveryRuntimeAndQosClass) {
    const std::string table = fixture("cgroup_paths.tsv");
    int checked = 0;
    for (std::string_view line : split_lines(table)) {
        if (line.empty() || line[0] == '#') continue;
        const auto f = split_fields(line, "\t");
        ASSERT_EQ(f.size(), 7u) << line;
        SCOPED_TRACE(std::string(f[0]));
        const WorkloadIdentity id = identify_cgroup_path(f[0]);
        EXPECT_EQ(id.kind, kind_named(f[1]));
        EXPECT_EQ(id.runtime, runtime_named(f[2]));
        EXPECT_EQ(id.container_id, dash_is_empty(f[3]));
        EXPECT_EQ(id.pod_uid, dash_is_empty(f[4]));
        EXPECT_EQ(id.qos, dash_is_empty(f[5]));
        EXPECT_EQ(id.vm_name, dash_is_empty(f[6]));
        ++checked;
    }
    EXPECT_GE(checked, 29) << "every sample of the fixture file was checked";
}

TEST(CgroupIdentity, ConmonIsARuntimeHelper) {
    const WorkloadIdentity id = identify_cgroup_path(
        "/machine.slice/libpod-conmon-7f3c2d1e0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d.scope");
    EXPECT_TRUE(id.runtime_helper);
    EXPECT_TRUE(id.container_id.empty());
}

TEST(CgroupIdentity, PodmanPodIdIsNoContainerItsConmonIsARuntimeHelper) {
    // Seen under `podman kube play` with the cgroupfs manager (deploy.containers): the pod id, a bare 64-hex
    // component, was taken for a container id, so conmon's CPU time became a "container" no runtime knows.
    const std::string pod = "/libpod_parent/7901c5874c85ca3a93bb122e5a588883153c6a826fbe5bf13074c54df6fa1320";
    const WorkloadIdentity conmon = identify_cgroup_path(pod + "/conmon");
    EXPECT_TRUE(conmon.runtime_helper);
    EXPECT_TRUE(conmon.container_id.empty());
    EXPECT_EQ(conmon.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_PODMAN));
    const WorkloadIdentity container =
        identify_cgroup_path(pod + "/libpod-4ac61e80615e641532ee8e6ff33b61d8bf546668b83f91656134f3566c834247");
    EXPECT_FALSE(container.runtime_helper);
    EXPECT_EQ(container.container_id, "4ac61e80615e641532ee8e6ff33b61d8bf546668b83f91656134f3566c834247");
}

TEST(CgroupIdentity, HostileInputIsBoundedAndNeverAWorkload) {
    EXPECT_EQ(identify_cgroup_path(std::string(10000, '/')).kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_SYSTEM));
    EXPECT_EQ(identify_cgroup_path("/kubepods/podNOT-A-UID!/xyz").kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_SYSTEM));
    EXPECT_EQ(identify_cgroup_path("/docker/too-short").kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_SYSTEM));
    EXPECT_EQ(identify_cgroup_path("/system.slice/docker-zzzz.scope").kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_SYSTEM));
    EXPECT_EQ(systemd_unescape("a\\x2d\\x2"), "a-\\x2");  // a cut-off escape stays as it is
    EXPECT_TRUE(parse_proc_cgroup("garbage\n::\n1:cpu:relative\n" + std::string(5000, 'x')).empty());
}

TEST(ProcCgroup, HybridHostWithDockerPrefersTheV1PathThatNamesTheContainer) {
    const auto lines = parse_proc_cgroup(fixture("proc_cgroup_hybrid_docker.txt"));
    ASSERT_EQ(lines.size(), 13u);
    EXPECT_EQ(lines.back().hierarchy, 0u);
    EXPECT_TRUE(lines.back().controllers.empty());
    const ChosenCgroup chosen = choose_cgroup(lines);
    EXPECT_EQ(chosen.controllers, "cpu,cpuacct");
    EXPECT_EQ(chosen.identity.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_CONTAINER));
    EXPECT_EQ(chosen.identity.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_DOCKER));
}

TEST(ProcCgroup, PureV2KubernetesPod) {
    const ChosenCgroup chosen = choose_cgroup(parse_proc_cgroup(fixture("proc_cgroup_v2_kubepods.txt")));
    EXPECT_TRUE(chosen.controllers.empty());
    EXPECT_EQ(chosen.identity.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_POD));
    EXPECT_EQ(chosen.identity.qos, "besteffort");
    EXPECT_EQ(chosen.identity.pod_uid, "0d9b6c4e-27a2-4b57-8bb9-4f1c9e2b9a10");
}

TEST(ProcCgroup, HybridKubernetesWithV2AtTheRoot) {
    const ChosenCgroup chosen = choose_cgroup(parse_proc_cgroup(fixture("proc_cgroup_hybrid_kubepods_v1.txt")));
    EXPECT_EQ(chosen.controllers, "cpu,cpuacct");
    EXPECT_EQ(chosen.identity.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_POD));
    EXPECT_EQ(chosen.identity.qos, "burstable");
}

TEST(ProcCgroup, HostProcessInTheRootIsSystem) {
    const ChosenCgroup chosen = choose_cgroup(parse_proc_cgroup(fixture("proc_cgroup_host.txt")));
    EXPECT_EQ(chosen.path, "/");
    EXPECT_EQ(chosen.identity.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_SYSTEM));
}

TEST(Qemu, NameWithEscapedCommaAndUuidFromTheCommandLine) {
    const QemuIdentity q = parse_qemu_cmdline(fixture("qemu_cmdline.bin"));
    EXPECT_TRUE(q.is_qemu);
    EXPECT_EQ(q.name, "ubuntu22,lts");
    EXPECT_EQ(q.uuid, "c7a5fdbd-cdaf-9455-926a-d65c16db1809");
    EXPECT_FALSE(parse_qemu_cmdline(std::string("/usr/bin/bash\0-name\0x\0", 22)).is_qemu);
    EXPECT_FALSE(parse_qemu_cmdline("").is_qemu);
}

TEST(Mountinfo, CgroupMountsOfAHybridHost) {
    const CgroupMounts m = parse_cgroup_mounts(fixture("mountinfo.txt"));
    EXPECT_EQ(m.unified, "/sys/fs/cgroup/unified");
    EXPECT_EQ(m.by_controller.at("cpu"), "/sys/fs/cgroup/cpu,cpuacct");
    EXPECT_EQ(m.by_controller.at("cpuacct"), "/sys/fs/cgroup/cpu,cpuacct");
    EXPECT_EQ(m.by_controller.at("name=systemd"), "/sys/fs/cgroup/systemd");
    EXPECT_EQ(m.by_controller.at("memory"), "/sys/fs/cgroup/with space");
}

TEST(WorkloadResolver, ThisProcessResolvesWithTheCgroupIdOfItsDirectory) {
    WorkloadResolver resolver;
    ProcessActivity self;
    self.key.tgid = static_cast<uint32_t>(getpid());
    self.set_comm("test");
    const auto w = resolver.resolve(self);
    ASSERT_NE(w, nullptr);
    EXPECT_FALSE(w->path.empty());
    EXPECT_EQ(w->path[0], '/');
    EXPECT_NE(self.cgroup_id, 0u) << "filled from the cgroup directory's inode";
    ProcessActivity kernel;
    kernel.key.tgid = 2;
    kernel.flags = KEPLERSHM_PROC_KERNEL;
    EXPECT_EQ(resolver.resolve(kernel)->identity.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_KERNEL));
}

TEST(WorkloadResolver, AProcessGoneFromProcGetsTheWorkloadOfItsCgroupId) {
    WorkloadResolver resolver;
    ProcessActivity self;
    self.key = ProcessKey{static_cast<uint32_t>(getpid()), 1};
    self.cgroup_id = 777;  // as the eBPF source would report it
    const auto known = resolver.resolve(self);
    ASSERT_NE(known, nullptr);
    ProcessActivity gone;
    gone.key = ProcessKey{0x7fffffff, 2};  // no such pid
    gone.cgroup_id = 777;
    EXPECT_EQ(resolver.resolve(gone), known);
    gone.key.start_ticks = 3;
    gone.cgroup_id = 778;
    EXPECT_EQ(resolver.resolve(gone), nullptr) << "an unknown cgroup stays unknown";
}

}  // namespace
}  // namespace kepler::collect
