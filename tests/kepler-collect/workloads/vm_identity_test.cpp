// VMs from their VMM's command line, written from each project's documented options: QEMU (qemu(1):
// -name, -uuid, -xen-domid, -accel), Firecracker (--id), Cloud Hypervisor (--api-socket), VirtualBox's
// VBoxHeadless (--startvm, --comment) and VMware's vmx (the .vmx path); and the resolver naming a real
// process's VM from a fake /proc.
#include "workloads/vm_identity.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "keplershm/keplershm.hpp"
#include "test_support.hpp"
#include "workloads/workload_resolver.hpp"

namespace kepler::collect {
namespace {

using testing::fixture;

/// A /proc/<pid>/cmdline from its arguments (each NUL-terminated).
std::string cmdline(const std::vector<std::string>& args) {
    std::string out;
    for (const std::string& a : args) out += a + '\0';
    return out;
}

VmProcess vm_of(const std::vector<std::string>& args) {
    const auto vm = identify_vm_process(cmdline(args));
    if (!vm) throw std::runtime_error("no VM in " + args[0]);
    return *vm;
}

TEST(VmIdentity, QemuNamesAndUuidsAsLibvirtAndPeopleWriteThem) {
    const auto libvirt = identify_vm_process(fixture("qemu_cmdline.bin"));  // captured from a libvirt host
    ASSERT_TRUE(libvirt);
    EXPECT_EQ(libvirt->runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_QEMU));
    EXPECT_EQ(libvirt->name, "ubuntu22,lts") << "\",,\" is QEMU's literal comma";
    EXPECT_EQ(libvirt->id, "c7a5fdbd-cdaf-9455-926a-d65c16db1809");

    const VmProcess by_hand = vm_of({"qemu-system-x86_64", "-name", "guest=kshmvm", "-machine", "pc", "-m", "64", "-display", "none"});
    EXPECT_EQ(by_hand.name, "kshmvm");
    EXPECT_EQ(by_hand.id, "") << "no -uuid: the resolver derives one";
    EXPECT_EQ(vm_of({"/usr/libexec/qemu-kvm", "-name", "plain", "-uuid", "C7A5FDBD-CDAF-9455-926A-D65C16DB1809"}).id,
              "c7a5fdbd-cdaf-9455-926a-d65c16db1809") << "kept in lower case";
    EXPECT_EQ(vm_of({"qemu-system-aarch64", "-uuid", "not-a-uuid"}).id, "") << "a malformed UUID names nothing";
    EXPECT_EQ(vm_of({"kvm", "-name", "a,process=qemu:a"}).name, "a");
    EXPECT_EQ(vm_of({"kvm", "-name", "web1,process=guest=worker"}).name, "web1") << "guest= inside a value names nothing";
    EXPECT_EQ(vm_of({"kvm", "-name", "debug-threads=on,guest=db,,2"}).name, "db,2") << "guest= need not come first";
    EXPECT_EQ(vm_of({"kvm", "-name", "process=qemu-vm"}).name, "") << "no guest name given";
}

TEST(VmIdentity, QemuAsXensDeviceModelIsXen) {
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"qemu-system-i386", "-xen-domid", "5", "-name", "hvm1"},
             {"qemu-system-x86_64", "-accel", "xen"},
             {"qemu-system-x86_64", "-machine", "xenfv,max-ram-below-4g=1G"},
             {"qemu-system-x86_64", "-machine", "pc,accel=xen"}}) {
        EXPECT_EQ(vm_of(args).runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_XEN)) << args[1] << " " << args[2];
    }
    EXPECT_EQ(vm_of({"qemu-system-x86_64", "-accel", "kvm"}).runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_QEMU));
}

TEST(VmIdentity, MicroVmsAndDesktopHypervisors) {
    const VmProcess fc = vm_of({"/usr/bin/firecracker", "--api-sock", "/run/fc/web.sock", "--id", "web-7"});
    EXPECT_EQ(fc.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_FIRECRACKER));
    EXPECT_EQ(fc.id, "web-7");
    EXPECT_EQ(fc.name, "web-7");
    EXPECT_EQ(vm_of({"firecracker", "--api-sock", "/tmp/a.sock"}).id, "");
    EXPECT_EQ(vm_of({"firecracker", "--id", "anonymous-instance"}).id, "") << "Firecracker's default names no VM";

    const VmProcess ch = vm_of({"cloud-hypervisor", "--api-socket", "path=/run/ch/db1.sock", "--cpus", "boot=2", "--kernel", "vmlinux"});
    EXPECT_EQ(ch.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_CLOUD_HYPERVISOR));
    EXPECT_EQ(ch.name, "db1");
    EXPECT_EQ(vm_of({"cloud-hypervisor", "--api-socket=/tmp/cache.sock"}).name, "cache");

    const VmProcess vbox = vm_of({"/usr/lib/virtualbox/VBoxHeadless", "--comment", "win10", "--startvm",
                                  "3f5c2a4e-1b2c-4d5e-8f90-a1b2c3d4e5f6", "--vrde", "config"});
    EXPECT_EQ(vbox.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_VIRTUALBOX));
    EXPECT_EQ(vbox.id, "3f5c2a4e-1b2c-4d5e-8f90-a1b2c3d4e5f6");
    EXPECT_EQ(vbox.name, "win10");
    EXPECT_EQ(vm_of({"VBoxHeadless", "--startvm", "builder"}).name, "builder");

    const VmProcess vmx = vm_of({"/usr/lib/vmware/bin/vmware-vmx", "-s", "vmx.stdio.keep=TRUE", "-#", "product=1;name=VMware Workstation",
                                 "-@", "duplex=3;msgs=ui", "/home/ana/vmware/web01/web01.vmx"});
    EXPECT_EQ(vmx.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_VMWARE));
    EXPECT_EQ(vmx.name, "web01");
}

TEST(VmIdentity, OtherProgramsRunNoVmAndValuesAreBounded) {
    EXPECT_FALSE(identify_vm_process(cmdline({"/usr/bin/bash", "-name", "x"})));
    EXPECT_FALSE(identify_vm_process(cmdline({"qemu-img", "convert", "a", "b"}))) << "QEMU's tools run no VM";
    EXPECT_FALSE(identify_vm_process(""));
    const VmProcess hostile = vm_of({"qemu-system-x86_64", "-name", std::string("guest=a\nb\x01") + std::string(500, 'x')});
    EXPECT_EQ(hostile.name.size(), 128u);
    EXPECT_EQ(hostile.name.substr(0, 4), "a_b_") << "label values stay printable";
    EXPECT_EQ(vm_of({"firecracker", "--id", std::string(100, 'f')}).id.size(), 64u);
}

TEST(VmIdentity, ADerivedIdIsStableForItsProcessAndNeverShared) {
    const std::string line = cmdline({"qemu-system-x86_64", "-name", "guest=kshmvm"});
    const std::string id = derived_vm_id(line, 4242, 99);
    EXPECT_EQ(id.size(), 16u);
    EXPECT_EQ(id, derived_vm_id(line, 4242, 99)) << "the same process: the same id after a collector restart";
    EXPECT_NE(id, derived_vm_id(line, 4243, 99)) << "a second VM with the same command line";
    EXPECT_NE(id, derived_vm_id(line, 4242, 100)) << "the pid reused by a new VM";
    EXPECT_EQ(default_vm_name(KEPLERSHM_RUNTIME_QEMU, "0123456789abcdef"), "kvm-01234567") << "Kepler's form";
    EXPECT_EQ(default_vm_name(KEPLERSHM_RUNTIME_XEN, "fedcba9876543210"), "xen-fedcba98");
    EXPECT_EQ(keplershm::hypervisor_name(KEPLERSHM_RUNTIME_LIBVIRT), "kvm");
    EXPECT_EQ(keplershm::hypervisor_name(KEPLERSHM_RUNTIME_VMWARE), "vmware");
    EXPECT_EQ(keplershm::hypervisor_name(99), "unknown") << "a newer minor's runtime";
}

/// The resolver on a fake /proc: the process's cgroup and command line are what it reads.
std::shared_ptr<const CgroupWorkload> resolve(const testing::TempDir& proc, uint32_t pid, const std::string& cgroup,
                                              const std::vector<std::string>& args, WorkloadResolver& resolver) {
    proc.write(std::to_string(pid) + "/cgroup", cgroup);
    proc.write(std::to_string(pid) + "/cmdline", cmdline(args));
    ProcessActivity p;
    p.key = ProcessKey{pid, 777};
    p.set_comm(args[0].substr(args[0].rfind('/') + 1));
    return resolver.resolve(p);
}

TEST(VmIdentity, TheResolverMakesAHostsVmmAVmAndLetsLibvirtsScopeWin) {
    testing::TempDir proc;
    WorkloadResolver resolver(proc.path().string(), 30, proc.path().string() + "/no-docker");
    const auto hand = resolve(proc, 301, "0::/user.slice/user-1000.slice/session-2.scope\n",
                              {"qemu-system-x86_64", "-name", "guest=kshmvm", "-m", "64"}, resolver);
    ASSERT_NE(hand, nullptr);
    EXPECT_EQ(hand->identity.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_VM));
    EXPECT_EQ(hand->identity.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_QEMU));
    EXPECT_EQ(hand->identity.vm_name, "kshmvm");
    EXPECT_EQ(hand->identity.vm_id, derived_vm_id(cmdline({"qemu-system-x86_64", "-name", "guest=kshmvm", "-m", "64"}), 301, 777));

    const auto unnamed = resolve(proc, 302, "0::/\n", {"/usr/bin/firecracker", "--api-sock", "/tmp/x.sock"}, resolver);
    EXPECT_EQ(unnamed->identity.vm_name, "kvm-" + unnamed->identity.vm_id.substr(0, 8));

    const auto libvirt = resolve(proc, 303, "0::/machine.slice/machine-qemu\\x2d1\\x2dubuntu.scope/libvirt/emulator\n",
                                 {"/usr/bin/qemu-system-x86_64", "-name", "guest=ubuntu,debug-threads=on", "-uuid",
                                  "c7a5fdbd-cdaf-9455-926a-d65c16db1809"}, resolver);
    EXPECT_EQ(libvirt->identity.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_LIBVIRT)) << "the scope wins";
    EXPECT_EQ(libvirt->identity.vm_id, "c7a5fdbd-cdaf-9455-926a-d65c16db1809");
    EXPECT_EQ(libvirt->identity.vm_name, "ubuntu");

    // KubeVirt-like: the VMM runs in a container, which stays the workload; the VM's default name is the
    // hypervisor's, not the container runtime's.
    const std::string pod_cgroup = "0::/machine.slice/libpod-" + std::string(64, 'a') + ".scope/container\n";
    const auto contained = resolve(proc, 305, pod_cgroup, {"/usr/libexec/qemu-kvm", "-m", "64"}, resolver);
    EXPECT_NE(contained->identity.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_VM)) << "the container's";
    EXPECT_EQ(contained->identity.vm_name, "kvm-" + contained->identity.vm_id.substr(0, 8));

    const auto bash = resolve(proc, 304, "0::/\n", {"/usr/bin/bash"}, resolver);
    EXPECT_EQ(bash->identity.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_SYSTEM));
    EXPECT_TRUE(bash->identity.vm_id.empty());
}

}  // namespace
}  // namespace kepler::collect
