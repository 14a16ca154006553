"""The collector's least privilege, run for real: uid 0 with a bounding set of CAP_BPF and CAP_PERFMON only,
no_new_privs, under deploy/kubernetes/seccomp/keplershm-collect.json (enforced by seccomp_exec.py) -- the
pod spec's securityContext. It must still load the eBPF program and publish per-process frames, and
each of the two extra permissions must be what makes that possible."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import deploy_support as ds  # noqa: E402

PROFILE = os.path.join(ds.KUBE_DIR, "seccomp", "keplershm-collect.json")
SECCOMP_EXEC = os.path.join(os.path.dirname(__file__), "seccomp_exec.py")


def syscall_names():
    with open("/usr/include/x86_64-linux-gnu/asm/unistd_64.h") as f:
        return set(re.findall(r"#define __NR_(\w+) \d+", f.read()))


def confined(command, capabilities=("bpf", "perfmon"), without=()):
    """`command` as the pod runs it: root, bounding set = capabilities, the seccomp profile."""
    bounding = "-all" + "".join(f",+{c}" for c in capabilities)
    seccomp = [a for name in without for a in ("--without", name)]
    return ["setpriv", f"--bounding-set={bounding}", "--inh-caps=-all", "--", "/usr/bin/python3", SECCOMP_EXEC,
            PROFILE] + seccomp + ["--"] + command


def bpf_works_here():
    result = subprocess.run([ds.COLLECT, f"--shm-name={ds.unique_name('bpf-check')}", "--frames=1",
                             "--interval=100ms", "--kube=off", "--source=bpf"], capture_output=True, text=True,
                            timeout=60)
    return result.returncode == 0


class SeccompProfile(unittest.TestCase):
    def test_profile_is_well_formed(self):
        with open(PROFILE) as f:
            profile = json.load(f)
        self.assertEqual(profile["defaultAction"], "SCMP_ACT_ERRNO", "an allow-list, not a deny-list")
        names = [n for rule in profile["syscalls"] for n in rule["names"]]
        self.assertEqual(len(names), len(set(names)), "each system call once")
        self.assertEqual(set(names) - syscall_names(), set(), "every name is an x86_64 system call")
        allowed = {n for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" for n in rule["names"]}
        self.assertTrue({"bpf", "perf_event_open"} <= allowed)
        for dangerous in ("mount", "umount2", "unshare", "setns", "ptrace", "kexec_load", "init_module",
                          "finit_module", "delete_module", "reboot", "swapon", "pivot_root", "keyctl", "add_key",
                          "io_uring_setup", "process_vm_writev", "open_by_handle_at"):
            self.assertNotIn(dangerous, allowed, dangerous)


class ConfinedCollector(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root (the collector runs as uid 0 with two capabilities)")

    def test_the_filter_is_enforced(self):
        result = subprocess.run(confined(["/usr/bin/unshare", "--mount", "true"]), capture_output=True, text=True)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("Operation not permitted", result.stderr)

    def test_collector_publishes_bpf_frames_with_only_bpf_and_perfmon_under_the_profile(self):
        if not bpf_works_here():
            self.skipTest("the collector cannot load eBPF on this machine even unconfined")
        name = ds.unique_name("seccomp")
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "collect.log")
            collect = confined([ds.COLLECT, f"--shm-name={name}", "--interval=200ms", "--kube=off", "--source=bpf"])
            with ds.running(collect, log) as collector:
                self.assertTrue(ds.wait_for(lambda: subprocess.run([ds.PROBE, f"--shm-name={name}"],
                                                                   capture_output=True).returncode == 0
                                            or collector.poll() is not None, 30), open(log).read())
                metrics = os.path.join(tmp, "metrics.prom")
                estimator = subprocess.run([ds.ESTIMATE, f"--shm-name={name}", "--listen=none", "--duration=2",
                                            "--process-metrics", f"--prom-out={metrics}"],
                                           capture_output=True, text=True, timeout=60)
                self.assertEqual(estimator.returncode, 0, estimator.stderr)
                self.assertIsNone(collector.poll(), open(log).read())
            self.assertEqual(collector.returncode, 0, open(log).read())
            self.assertIn("source: bpf", open(log).read())
            with open(metrics) as f:
                pids = set(re.findall(r'^kepler_process_joules_total\{[^}]*pid="(\d+)"', f.read(), re.M))
            self.assertGreater(len(pids), 1, "host processes resolved through /proc without CAP_DAC_* or CAP_SYS_PTRACE")

    def test_each_extra_permission_is_needed(self):
        if not bpf_works_here():
            self.skipTest("the collector cannot load eBPF on this machine even unconfined")
        for label, command in (
                ("without CAP_BPF", confined([], capabilities=("perfmon",))),
                ("without bpf() in the profile", confined([], without=("bpf",)))):
            argv = command + [ds.COLLECT, f"--shm-name={ds.unique_name('seccomp-less')}", "--frames=1",
                              "--interval=100ms", "--kube=off", "--source=bpf"]
            result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(result.returncode, 0, f"{label}: --source=bpf must fail")
            self.assertIn("eBPF", result.stderr, label)


if __name__ == "__main__":
    unittest.main()
