// Workload identity from cgroup paths captured on real nodes of each runtime and QoS class
// (fixtures/cgroup_paths.tsv), whole /proc/<pid>/cgroup files of v1, v2 and hybrid hosts, qemu
// command lines and mountinfo.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

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

const std::string kId = "7f3c2d1e0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d";
const std::string kOtherId(64, 'b');
const std::string kPodUid = "0d9b6c4e-27a2-4b57-8bb9-4f1c9e2b9a10";
const std::string kPodSlice = "kubepods-besteffort-pod0d9b6c4e_27a2_4b57_8bb9_4f1c9e2b9a10.slice";
const std::string kUserManager = "/user.slice/user-1000.slice/user@1000.service";

bool names_nothing_identity(const WorkloadIdentity& id) {
    return id.kind == KEPLERSHM_WORKLOAD_SYSTEM && id.container_id.empty() && id.pod_uid.empty() && !id.rootless_uid &&
           !id.runtime_helper && id.owner_decides.empty();
}

bool names_nothing(const std::string& path) { return names_nothing_identity(identify_cgroup_path(path)); }

/// The cgroup whose owner decides the claim `path` makes ("" when the path decides alone).
std::string owner_decides(const std::string& path) { return identify_cgroup_path(path).owner_decides; }

TEST(CgroupIdentity, AUsersDelegatedScopeIsItsOwnRootlessContainerNeverASystemOne) {
    // Everything below user@<uid>.service is the user's to name (systemd delegates it).
    const WorkloadIdentity docker = identify_cgroup_path(kUserManager + "/app.slice/docker-" + kId + ".scope");
    EXPECT_EQ(docker.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_CONTAINER));
    EXPECT_EQ(docker.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_DOCKER));
    ASSERT_TRUE(docker.rootless_uid.has_value());
    EXPECT_EQ(*docker.rootless_uid, 1000u);
    EXPECT_EQ(owned_container_id(docker.container_id, docker.rootless_uid), "uid1000-" + kId)
        << "published under its user: never the system container of that id";
    EXPECT_EQ(owned_container_id(kId, std::nullopt), kId);
    const WorkloadIdentity podman = identify_cgroup_path(kUserManager + "/user.slice/libpod-" + kId + ".scope");
    EXPECT_EQ(podman.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_PODMAN));
    EXPECT_EQ(podman.rootless_uid, std::optional<uint32_t>(1000));
    // Kubernetes' runtimes and layouts have no rootless form here: named by the user, they name nothing.
    EXPECT_TRUE(names_nothing(kUserManager + "/app.slice/cri-containerd-" + kId + ".scope"));
    EXPECT_TRUE(names_nothing(kUserManager + "/app.slice/crio-" + kId + ".scope"));
    EXPECT_TRUE(names_nothing(kUserManager + "/app.slice/kubepods.slice/kubepods-besteffort.slice/" + kPodSlice +
                              "/cri-containerd-" + kId + ".scope"));
    EXPECT_TRUE(names_nothing(kUserManager + "/kubepods/besteffort/pod" + kPodUid + "/" + kId));
    EXPECT_TRUE(names_nothing(kUserManager + "/app.slice/" + kId)) << "a bare id";
    EXPECT_TRUE(names_nothing(kUserManager + "/machine.slice/machine-qemu\\x2d1\\x2dubuntu22.scope"));
    // Another user's manager, named inside this user's subtree or next to the wrong user slice.
    EXPECT_EQ(identify_cgroup_path(kUserManager + "/app.slice/user-0.slice/user@0.service/libpod-" + kId + ".scope").rootless_uid,
              std::optional<uint32_t>(1000));
    EXPECT_TRUE(names_nothing("/user.slice/user-1000.slice/user@1001.service/libpod-" + kId + ".scope"));
}

TEST(CgroupIdentity, RuntimeNamesCountOnlyWhereTheirRuntimePutsThem) {
    // A system service with Delegate=yes (and User=) names its own subtree, as a user does: a runtime's
    // name there is believed on its owner's word only (root's runtime, or the user's rootless one).
    EXPECT_EQ(owner_decides("/system.slice/foo.service/docker-" + kId + ".scope"), "/system.slice/foo.service/docker-" + kId + ".scope");
    EXPECT_TRUE(names_nothing("/system.slice/foo.service/kubepods.slice/" + kPodSlice));
    EXPECT_TRUE(names_nothing("/system.slice/cri-containerd-" + kId + ".scope")) << "CRI scopes live in pods";
    EXPECT_TRUE(names_nothing("/machine.slice/docker-" + kId + ".scope"));
    EXPECT_TRUE(names_nothing("/user.slice/kubepods.slice/kubepods-besteffort.slice/" + kPodSlice));
    EXPECT_TRUE(names_nothing("/user.slice/user-1000.slice/session-3.scope/docker-" + kId + ".scope"));
    EXPECT_TRUE(names_nothing("/user.slice/docker/" + kId));
    // kubelet's slices extend their parent's name (systemd's rule); a pod slice elsewhere is none of kubelet's.
    EXPECT_TRUE(names_nothing("/kubepods.slice/kubepods-besteffort.slice/kubepods-burstable-pod" + kPodUid + ".slice"));
    EXPECT_TRUE(names_nothing("/kubepods.slice/kubepods.slice/" + kPodSlice));
    // Below a container, its own processes name cgroups (a writable cgroupfs): the first container wins.
    EXPECT_EQ(identify_cgroup_path("/docker/" + kId + "/docker/" + kOtherId).container_id, kId);
    EXPECT_EQ(identify_cgroup_path("/machine.slice/libpod-" + kId + ".scope/container/docker-" + kOtherId + ".scope").container_id, kId);
    const WorkloadIdentity pod = identify_cgroup_path("/kubepods.slice/kubepods-besteffort.slice/" + kPodSlice + "/cri-containerd-" +
                                                      kId + ".scope/kubepods-pod1111.slice/cri-containerd-" + kOtherId + ".scope");
    EXPECT_EQ(pod.container_id, kId);
    EXPECT_EQ(pod.pod_uid, kPodUid);
}

TEST(CgroupIdentity, DotComponentsLongPathsAndRepeatedPrefixesNameNothing) {
    EXPECT_TRUE(names_nothing(kUserManager + "/../../../system.slice/docker-" + kId + ".scope"));
    EXPECT_TRUE(names_nothing("/system.slice/docker-" + kId + ".scope/.."));
    EXPECT_TRUE(names_nothing("/system.slice/./docker-" + kId + ".scope"));
    EXPECT_TRUE(names_nothing("/kubepods.slice/../kubepods.slice/kubepods-besteffort.slice/" + kPodSlice));
    EXPECT_TRUE(names_nothing("/system.slice/docker-docker-" + kId + ".scope"));
    EXPECT_TRUE(names_nothing("/system.slice/docker-" + std::string(129, 'a') + ".scope")) << "ids are at most 128 hex digits";
    const WorkloadIdentity conmon = identify_cgroup_path("/kubepods.slice/kubepods-besteffort.slice/" + kPodSlice + "/crio-conmon-crio-" + kId + ".scope");
    EXPECT_TRUE(conmon.container_id.empty());
    EXPECT_FALSE(conmon.runtime_helper);
    std::string repeated;
    while (repeated.size() < 4000) repeated += "/kubepods.slice";
    EXPECT_TRUE(names_nothing(repeated));
    std::string deep = "/system.slice/docker-" + kId + ".scope";
    while (deep.size() < 4096) deep += "/a";
    deep.resize(4096);
    EXPECT_EQ(identify_cgroup_path(deep).container_id, kId) << "4096 bytes: the longest path read";
    EXPECT_TRUE(names_nothing(deep + "a"));
    EXPECT_TRUE(names_nothing("/machine/.libvirt-qemu")) << "a VM without a name";
    EXPECT_TRUE(names_nothing("/user.slice/user-01000.slice/user@01000.service/libpod-" + kId + ".scope"))
        << "systemd writes uids without leading zeros";
    EXPECT_EQ(identify_cgroup_path("/kubepods/pod0d9b6c4e_27a2_4b57_8bb9_4f1c9e2b9a10/" + kId).pod_uid, kPodUid)
        << "the API server's spelling, whichever driver";
}

TEST(CgroupIdentity, ACgroupNamespacesRelativePathIsReadFromItsFirstComponent) {
    // The collector in a container of its own reads other cgroups as "/../..", up to a common ancestor of
    // its own cgroup, then down: the first component is where its layout puts it.
    const WorkloadIdentity full = identify_cgroup_path("/../../kubepods.slice/kubepods-besteffort.slice/" + kPodSlice + "/cri-containerd-" + kId + ".scope");
    EXPECT_EQ(full.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_POD));
    EXPECT_EQ(full.container_id, kId);
    const WorkloadIdentity pod_slice = identify_cgroup_path("/../../" + kPodSlice + "/crio-" + kId + ".scope");
    EXPECT_EQ(pod_slice.pod_uid, kPodUid);
    EXPECT_EQ(pod_slice.qos, "besteffort");
    EXPECT_EQ(pod_slice.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_CRIO));
    const WorkloadIdentity cgroupfs = identify_cgroup_path("/../burstable/pod" + kPodUid + "/" + kId);
    EXPECT_EQ(cgroupfs.qos, "burstable");
    EXPECT_EQ(cgroupfs.container_id, kId);
    EXPECT_EQ(identify_cgroup_path("/../../libpod-" + kId + ".scope").runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_PODMAN));
    EXPECT_EQ(identify_cgroup_path("/../.." + kUserManager + "/app.slice/docker-" + kId + ".scope").rootless_uid,
              std::optional<uint32_t>(1000));
    // Conditional as on the host; the resolver cannot see the owner of a cgroup outside its namespace.
    EXPECT_EQ(owner_decides("/../../system.slice/foo.service/docker-" + kId + ".scope"),
              "/../../system.slice/foo.service/docker-" + kId + ".scope");
}

/// What a conditional claim says: its runtime, id and the cgroup whose owner decides.
void expect_conditional(const std::string& path, uint32_t runtime, const std::string& id, const std::string& owner_cgroup) {
    SCOPED_TRACE(path);
    const WorkloadIdentity claim = identify_cgroup_path(path);
    EXPECT_EQ(claim.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_CONTAINER));
    EXPECT_EQ(claim.runtime, runtime);
    EXPECT_EQ(claim.container_id, id);
    EXPECT_FALSE(claim.rootless_uid.has_value());
    EXPECT_EQ(claim.owner_decides, owner_cgroup);
}

TEST(CgroupIdentity, PodmanUnderSystemdIsTheServicesChildOnItsOwnersWord) {
    // quadlet (podman --cgroups=split in the unit): podman's source joins its own cgroup and
    // "libpod-payload-<id>" for the container; conmon moves to the "runtime" child.
    const std::string payload = "/system.slice/myapp.service/libpod-payload-" + kId;
    expect_conditional(payload, KEPLERSHM_RUNTIME_PODMAN, kId, payload);
    {
        SCOPED_TRACE("the container's own cgroup decides, not the process's");
        expect_conditional(payload + "/init.scope", KEPLERSHM_RUNTIME_PODMAN, kId, payload);
    }
    EXPECT_TRUE(names_nothing("/system.slice/myapp.service/runtime"));
    EXPECT_TRUE(names_nothing("/system.slice/myapp.service"));
    // A template unit's instance (system-<name>.slice) and a unit with Slice= of the admin's.
    const std::string instance = "/system.slice/system-app.slice/app@1.service/libpod-payload-" + kId;
    expect_conditional(instance, KEPLERSHM_RUNTIME_PODMAN, kId, instance);
    const std::string sliced = "/apps.slice/apps-web.slice/web.service/libpod-payload-" + kId;
    expect_conditional(sliced, KEPLERSHM_RUNTIME_PODMAN, kId, sliced);
    // Rootless quadlet: in the user's manager the path decides, as for any rootless container.
    const WorkloadIdentity rootless = identify_cgroup_path(kUserManager + "/app.slice/myapp.service/libpod-payload-" + kId);
    EXPECT_EQ(rootless.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_PODMAN));
    EXPECT_EQ(rootless.container_id, kId);
    EXPECT_EQ(rootless.rootless_uid, std::optional<uint32_t>(1000));
    EXPECT_TRUE(rootless.owner_decides.empty());
    // Only the service's own children, and only the runtimes that run there.
    EXPECT_TRUE(names_nothing("/system.slice/myapp.service/supervisor/libpod-payload-" + kId));
    EXPECT_TRUE(names_nothing("/system.slice/myapp.service/cri-containerd-" + kId + ".scope"));
    EXPECT_TRUE(names_nothing("/system.slice/myapp.service/" + kId)) << "a bare id";
    EXPECT_TRUE(names_nothing("/system.slice/libpod-payload-" + kId)) << "payloads live in podman's own cgroup";
    EXPECT_TRUE(names_nothing("/system.slice/other.slice/myapp.service/libpod-payload-" + kId)) << "not system-*.slice";
    EXPECT_TRUE(names_nothing("/user.slice/myapp.service/libpod-payload-" + kId));
    // The first container wins: a runtime's name inside the payload is the payload's.
    expect_conditional(payload + "/docker-" + kOtherId + ".scope", KEPLERSHM_RUNTIME_PODMAN, kId, payload);
}

TEST(CgroupIdentity, ACgroupParentOfTheAdminsIsBelievedOnItsOwnersWord) {
    // docker/podman/nerdctl --cgroup-parent=foo.slice (systemd driver), and a nested foo-bar.slice.
    const std::string docker = "/foo.slice/docker-" + kId + ".scope";
    expect_conditional(docker, KEPLERSHM_RUNTIME_DOCKER, kId, docker);
    const std::string nested = "/foo.slice/foo-bar.slice/docker-" + kId + ".scope";
    expect_conditional(nested + "/sub", KEPLERSHM_RUNTIME_DOCKER, kId, nested);
    expect_conditional("/foo.slice/libpod-" + kId + ".scope", KEPLERSHM_RUNTIME_PODMAN, kId, "/foo.slice/libpod-" + kId + ".scope");
    expect_conditional("/foo.slice/nerdctl-" + kId + ".scope", KEPLERSHM_RUNTIME_CONTAINERD, kId, "/foo.slice/nerdctl-" + kId + ".scope");
    const WorkloadIdentity conmon = identify_cgroup_path("/foo.slice/libpod-conmon-" + kId + ".scope");
    EXPECT_TRUE(conmon.runtime_helper);
    EXPECT_EQ(conmon.owner_decides, "/foo.slice/libpod-conmon-" + kId + ".scope");
    // systemd's escapes are decoded to recognise the slice; the directory keeps its name as written.
    const std::string escaped = "/foo.slice/foo\\x2dbar.slice/docker-" + kId + ".scope";
    expect_conditional(escaped, KEPLERSHM_RUNTIME_DOCKER, kId, escaped);
    // docker's cgroupfs driver, --cgroup-parent=/mygroup: a bare id (no runtime in the name).
    expect_conditional("/mygroup/" + kId, KEPLERSHM_RUNTIME_UNKNOWN, kId, "/mygroup/" + kId);
    EXPECT_TRUE(names_nothing("/mygroup/sub/" + kId)) << "one directory deep, as docker makes it";
    EXPECT_TRUE(names_nothing("/init.scope/" + kId));
    EXPECT_TRUE(names_nothing("/mygroup/docker-" + kId + ".scope"));
    // What the path decided before stays decided by the path.
    EXPECT_TRUE(names_nothing("/foo.slice/bar.slice/docker-" + kId + ".scope")) << "systemd names no such slice";
    EXPECT_TRUE(names_nothing("/foo.slice/cri-containerd-" + kId + ".scope"));
    EXPECT_TRUE(identify_cgroup_path("/system.slice/docker-" + kId + ".scope").owner_decides.empty());
    EXPECT_TRUE(identify_cgroup_path("/docker/" + kId).owner_decides.empty());
    const WorkloadIdentity kubelet = identify_cgroup_path("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
                                                          "kubelet-kubepods-besteffort-pod0d9b6c4e_27a2_4b57_8bb9_4f1c9e2b9a10.slice");
    EXPECT_EQ(kubelet.pod_uid, kPodUid);
    EXPECT_TRUE(kubelet.owner_decides.empty());
}

TEST(CgroupIdentity, TheOwnerDecidesAConditionalClaim) {
    const WorkloadIdentity claim = identify_cgroup_path("/system.slice/foo.service/docker-" + kId + ".scope");
    const WorkloadIdentity root = decide_by_owner(claim, 0);
    EXPECT_EQ(root.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_CONTAINER));
    EXPECT_EQ(owned_container_id(root.container_id, root.rootless_uid), kId) << "root's runtime: the system's container";
    EXPECT_TRUE(root.owner_decides.empty());
    const WorkloadIdentity user = decide_by_owner(claim, 1000);
    EXPECT_EQ(user.rootless_uid, std::optional<uint32_t>(1000));
    EXPECT_EQ(owned_container_id(user.container_id, user.rootless_uid), "uid1000-" + kId) << "never the system's";
    EXPECT_TRUE(names_nothing_identity(decide_by_owner(claim, std::nullopt))) << "an owner not known names nothing";
    const WorkloadIdentity system = identify_cgroup_path("/system.slice/docker-" + kId + ".scope");
    EXPECT_FALSE(decide_by_owner(system, 1000).rootless_uid.has_value()) << "the path decided: no owner is asked";
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
    self.key.pid = static_cast<uint32_t>(getpid());
    self.set_comm("test");
    const auto w = resolver.resolve(self);
    ASSERT_NE(w, nullptr);
    EXPECT_FALSE(w->path.empty());
    EXPECT_EQ(w->path[0], '/');
    EXPECT_NE(self.cgroup_id, 0u) << "filled from the cgroup directory's inode";
    ProcessActivity kernel;
    kernel.key.pid = 2;
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
    gone.key.start_time_ticks = 3;
    gone.cgroup_id = 778;
    EXPECT_EQ(resolver.resolve(gone), nullptr) << "an unknown cgroup stays unknown";
}

/// A fake host for the resolver: /proc (with the collector's mountinfo) and a cgroupfs in temp
/// directories. Owners are set with chown, which needs root.
class FakeHost {
public:
    /// `mountinfo` lines, with "@" standing for the cgroupfs directory.
    explicit FakeHost(const std::string& mountinfo = "36 25 0:30 / @ rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n") {
        std::string text = mountinfo;
        for (size_t at = text.find('@'); at != std::string::npos; at = text.find('@', at)) text.replace(at, 1, cgroupfs.path().string());
        proc.write("self/mountinfo", text);
    }
    /// A cgroup directory below the cgroupfs (parents as they are or root's), owned by `uid`.
    void cgroup(const std::string& path, uid_t uid) const {
        const std::filesystem::path dir = cgroupfs.path().string() + path;
        std::filesystem::create_directories(dir);
        EXPECT_EQ(::chown(dir.c_str(), uid, uid), 0) << dir;
    }
    /// The workload the resolver finds for a new process whose /proc/<pid>/cgroup is `proc_cgroup`.
    std::shared_ptr<const CgroupWorkload> resolve(const std::string& proc_cgroup) {
        const uint32_t pid = next_pid_++;
        proc.write(std::to_string(pid) + "/cgroup", proc_cgroup);
        if (!resolver_) resolver_ = std::make_unique<WorkloadResolver>(proc.path().string(), 30, proc.path().string() + "/no-docker");
        ProcessActivity p;
        p.key = ProcessKey{pid, 1};
        p.set_comm("payload");
        return resolver_->resolve(p);
    }
    testing::TempDir proc;
    testing::TempDir cgroupfs;

private:
    uint32_t next_pid_ = 100;
    std::unique_ptr<WorkloadResolver> resolver_;
};

bool is_system(const std::shared_ptr<const CgroupWorkload>& w) {
    return w != nullptr && w->identity.kind == KEPLERSHM_WORKLOAD_SYSTEM && w->identity.container_id.empty() &&
           !w->identity.rootless_uid && w->identity.owner_decides.empty();
}

#define SKIP_UNLESS_ROOT() \
    if (geteuid() != 0) GTEST_SKIP() << "a cgroup directory owned by root or by another user needs chown, which needs root"

TEST(WorkloadResolver, QuadletPayloadsAreTheSystemsOrTheirUsersByTheirOwner) {
    SKIP_UNLESS_ROOT();
    FakeHost host;
    const std::string payload = "/system.slice/myapp.service/libpod-payload-" + kId;
    host.cgroup(payload, 0);
    host.cgroup(payload + "/init", 1000);  // the container's own children do not decide
    for (const std::string& path : {payload, payload + "/init"}) {
        const auto w = host.resolve("0::" + path + "\n");
        ASSERT_NE(w, nullptr);
        EXPECT_EQ(w->path, path);
        EXPECT_EQ(w->identity.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_CONTAINER));
        EXPECT_EQ(w->identity.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_PODMAN));
        EXPECT_EQ(w->identity.container_id, kId) << "root made it: the system's container";
        EXPECT_FALSE(w->identity.rootless_uid.has_value());
        EXPECT_TRUE(w->identity.owner_decides.empty());
    }
    // A service with Delegate=yes and User=1000 (rootless podman in a system unit): the user's.
    const std::string users = "/system.slice/userapp.service/libpod-payload-" + kOtherId;
    host.cgroup("/system.slice/userapp.service", 1000);
    host.cgroup(users, 1000);
    const auto rootless = host.resolve("0::" + users + "\n");
    EXPECT_EQ(rootless->identity.container_id, "uid1000-" + kOtherId);
    EXPECT_EQ(rootless->identity.rootless_uid, std::optional<uint32_t>(1000));
    // Rootless quadlet in the user's manager: the path decides; no directory is needed.
    const auto manager = host.resolve("0::" + kUserManager + "/app.slice/myapp.service/libpod-payload-" + kId + "\n");
    EXPECT_EQ(manager->identity.container_id, "uid1000-" + kId);
}

// crun on cgroup v2 hands a container's cgroup to the uid its user namespace maps to root: a subordinate
// uid, not the container's owner. Who made the directory decides (its parent's owner), not whom it was
// handed to.
TEST(WorkloadResolver, AContainerCgroupHandedToItsUserNamespaceStaysItsMakersContainer) {
    SKIP_UNLESS_ROOT();
    FakeHost host;
    // A rootful quadlet with UserNS=auto: podman picked 524288 from the containers user's range.
    const std::string quadlet = "/system.slice/myapp.service/libpod-payload-" + kId;
    host.cgroup("/system.slice/myapp.service", 0);
    host.cgroup(quadlet, 524288);
    const auto system = host.resolve("0::" + quadlet + "\n");
    ASSERT_NE(system, nullptr);
    EXPECT_EQ(system->identity.container_id, kId) << "root made it: the system's container";
    EXPECT_FALSE(system->identity.rootless_uid.has_value());
    // Docker with userns-remap and --cgroup-parent, the scope handed to the remapped root.
    host.cgroup("/foo.slice/docker-" + kOtherId + ".scope", 231072);
    EXPECT_EQ(host.resolve("0::/foo.slice/docker-" + kOtherId + ".scope\n")->identity.container_id, kOtherId);
    // Rootless podman --userns=auto in user 1000's delegated service: the payload handed to one of 1000's
    // subordinate uids is still 1000's container.
    const std::string rootless = "/system.slice/userapp.service/libpod-payload-" + kOtherId;
    host.cgroup("/system.slice/userapp.service", 1000);
    host.cgroup(rootless, 100000);
    const auto user = host.resolve("0::" + rootless + "\n");
    EXPECT_EQ(user->identity.container_id, "uid1000-" + kOtherId);
    EXPECT_EQ(user->identity.rootless_uid, std::optional<uint32_t>(1000));
}

TEST(WorkloadResolver, AUsersDockerScopeInADelegatedServiceIsItsRootlessContainerNeverTheSystems) {
    SKIP_UNLESS_ROOT();
    FakeHost host;
    const std::string planted = "/system.slice/foo.service/docker-" + kId + ".scope";
    host.cgroup("/system.slice/foo.service", 1000);
    host.cgroup(planted, 1000);
    const auto w = host.resolve("0::" + planted + "\n");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->identity.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_CONTAINER));
    EXPECT_EQ(w->identity.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_DOCKER));
    EXPECT_EQ(w->identity.container_id, "uid1000-" + kId);
    EXPECT_EQ(w->identity.rootless_uid, std::optional<uint32_t>(1000));
    // Root's docker in a delegated service of root's: the system's container.
    host.cgroup("/system.slice/bar.service/docker-" + kOtherId + ".scope", 0);
    EXPECT_EQ(host.resolve("0::/system.slice/bar.service/docker-" + kOtherId + ".scope\n")->identity.container_id, kOtherId);
}

TEST(WorkloadResolver, CgroupParentsOfTheAdminsAreTheSystemsContainersWhenRootMadeThem) {
    SKIP_UNLESS_ROOT();
    FakeHost host;
    struct Case {
        std::string path;
        uint32_t runtime;
    };
    for (const Case& c : {Case{"/foo.slice/docker-" + kId + ".scope", KEPLERSHM_RUNTIME_DOCKER},
                          Case{"/foo.slice/foo-bar.slice/docker-" + kId + ".scope", KEPLERSHM_RUNTIME_DOCKER},
                          Case{"/foo.slice/libpod-" + kId + ".scope", KEPLERSHM_RUNTIME_PODMAN},
                          Case{"/mygroup/" + kId, KEPLERSHM_RUNTIME_UNKNOWN}}) {
        SCOPED_TRACE(c.path);
        host.cgroup(c.path, 0);
        const auto w = host.resolve("0::" + c.path + "\n");
        ASSERT_NE(w, nullptr);
        EXPECT_EQ(w->identity.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_CONTAINER));
        EXPECT_EQ(w->identity.runtime, c.runtime);
        EXPECT_EQ(w->identity.container_id, kId);
        EXPECT_FALSE(w->identity.rootless_uid.has_value());
    }
}

TEST(WorkloadResolver, AnOwnerThatCannotBeReadNamesNothing) {
    SKIP_UNLESS_ROOT();
    FakeHost host;
    // No such directory: the process (and its cgroup) is gone, or this cgroupfs does not show it.
    EXPECT_TRUE(is_system(host.resolve("0::/system.slice/myapp.service/libpod-payload-" + kId + "\n")));
    // Not a directory, or a symbolic link to another one: its owner is no cgroup's.
    host.cgroup("/system.slice/foo.service/docker-" + kId + ".scope", 0);
    std::filesystem::create_directories(host.cgroupfs.path() / "system.slice/link.service");
    std::filesystem::create_directory_symlink(host.cgroupfs.path() / ("system.slice/foo.service/docker-" + kId + ".scope"),
                                              host.cgroupfs.path() / ("system.slice/link.service/docker-" + kId + ".scope"));
    EXPECT_TRUE(is_system(host.resolve("0::/system.slice/link.service/docker-" + kId + ".scope\n")));
    host.cgroup("/system.slice/file.service", 0);
    std::ofstream(host.cgroupfs.path() / ("system.slice/file.service/docker-" + kId + ".scope")) << "";
    EXPECT_TRUE(is_system(host.resolve("0::/system.slice/file.service/docker-" + kId + ".scope\n")));
    // A cgroup namespace's view ("/.." up to a common ancestor): outside the collector's mount, where the
    // mount point joined with it names another directory, here a root-owned one of the right name.
    FakeHost ns("36 25 0:30 / @/inner rw - cgroup2 cgroup2 rw\n");
    ns.cgroup("/inner", 0);
    ns.cgroup("/system.slice/foo.service/docker-" + kId + ".scope", 0);
    EXPECT_TRUE(is_system(ns.resolve("0::/../system.slice/foo.service/docker-" + kId + ".scope\n")));
}

TEST(WorkloadResolver, TheOwnerIsReadInTheHierarchyThePathCameFrom) {
    SKIP_UNLESS_ROOT();
    // A hybrid host: v2 at the root says nothing, v1 cpu names the container; only the v1 tree has it.
    FakeHost host("35 25 0:29 / @/unified rw - cgroup2 cgroup2 rw\n"
                  "36 25 0:30 / @/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n");
    const std::string path = "/foo.slice/docker-" + kId + ".scope";
    host.cgroup("/unified", 0);
    host.cgroup("/cpu,cpuacct" + path, 0);
    const auto w = host.resolve("4:cpu,cpuacct:" + path + "\n0::/\n");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->identity.container_id, kId);
    // A mount of a subtree of its hierarchy (root "/docker/abc"): mount point + path is another cgroup.
    FakeHost subtree("36 25 0:30 /docker/abc @ rw - cgroup2 cgroup2 rw\n");
    subtree.cgroup(path, 0);
    EXPECT_TRUE(is_system(subtree.resolve("0::" + path + "\n")));
}

}  // namespace
}  // namespace kepler::collect
