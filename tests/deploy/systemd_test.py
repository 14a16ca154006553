"""deploy/systemd: the units pass systemd-analyze verify, their command lines run with this build's
binaries, and the privileges and ownership they state match deploy/README.md."""
import configparser
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import deploy_support as ds  # noqa: E402

SYSTEMD_DIR = os.path.join(ds.DEPLOY_DIR, "systemd")
BINARIES = {"/usr/local/bin/kepler-collect": lambda: ds.COLLECT, "/usr/local/bin/kepler-estimate": lambda: ds.ESTIMATE,
            "/usr/local/bin/keplershm-probe": lambda: ds.PROBE}


def unit(name):
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str
    with open(os.path.join(SYSTEMD_DIR, name)) as f:
        parser.read_string(f.read().replace("\\\n", " "))
    return parser


def exec_start(name):
    return shlex.split(unit(name)["Service"]["ExecStart"])


def local_binaries(text):
    for installed, built in BINARIES.items():
        text = text.replace(installed, built())
    return text


class SystemdUnits(unittest.TestCase):
    def test_units_verify_cleanly(self):
        with tempfile.TemporaryDirectory() as tmp:
            names = sorted(n for n in os.listdir(SYSTEMD_DIR) if n.endswith((".service", ".timer")))
            for name in names:
                with open(os.path.join(SYSTEMD_DIR, name)) as f, open(os.path.join(tmp, name), "w") as out:
                    out.write(local_binaries(f.read()))
            result = subprocess.run(["systemd-analyze", "verify"] + names, cwd=tmp, capture_output=True, text=True,
                                    timeout=60)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(result.stderr.strip(), "", "no warnings (unknown keys, bad values, missing binaries)")

    def test_options_exist(self):
        for name, binary in (("kepler-collect.service", ds.COLLECT), ("kepler-estimate.service", ds.ESTIMATE)):
            known = ds.help_options(binary)
            for arg in exec_start(name)[1:]:
                self.assertIn(ds.split_flag(arg)[0], known, f"{name}: {arg}")
        health = exec_start("keplershm-health.service")
        probe = shlex.split(health[-1].split("||")[0])
        self.assertEqual(probe[0], "/usr/local/bin/keplershm-probe")
        known = ds.help_options(ds.PROBE)
        for arg in probe[1:]:
            self.assertIn(ds.split_flag(arg)[0], known, f"keplershm-health.service: {arg}")

    def test_collector_privileges_and_segment_group(self):
        service = unit("kepler-collect.service")["Service"]
        capabilities = set(service["CapabilityBoundingSet"].split())
        self.assertTrue({"CAP_BPF", "CAP_PERFMON"} <= capabilities <= {"CAP_BPF", "CAP_PERFMON", "CAP_SYS_RESOURCE"},
                        capabilities)
        self.assertEqual(service["User"], "root")
        self.assertEqual(service["NoNewPrivileges"], "yes")
        self.assertIn("/dev/shm", service["ReadWritePaths"].split())
        self.assertEqual(service["ProtectSystem"], "strict")
        filters = service["SystemCallFilter"].split()
        self.assertIn("bpf", filters)
        self.assertIn("perf_event_open", filters)
        mode = int(ds.flag_value(exec_start("kepler-collect.service"), "--segment-mode"), 8)
        self.assertTrue(mode & 0o040 and not mode & 0o027, f"group-readable only: {mode:o}")

    def test_estimator_is_a_dynamic_user_in_the_segment_group(self):
        collector = unit("kepler-collect.service")["Service"]
        service = unit("kepler-estimate.service")["Service"]
        self.assertEqual(service["DynamicUser"], "yes")
        self.assertIn(collector["Group"], service["SupplementaryGroups"].split())
        self.assertEqual(service["CapabilityBoundingSet"], "", "no capabilities at all")
        self.assertIn("/dev/shm", service["ReadOnlyPaths"].split())
        self.assertEqual(ds.flag_value(exec_start("kepler-estimate.service"), "--shm-name"),
                         ds.flag_value(exec_start("kepler-collect.service"), "--shm-name"))
        with open(os.path.join(SYSTEMD_DIR, "keplershm.sysusers.conf")) as f:
            groups = [line.split()[1] for line in f if line.strip() and not line.startswith("#") and line.split()[0] == "g"]
        self.assertEqual(groups, [collector["Group"]], "sysusers.d creates the group both units use")

    def test_restart_comes_after_a_killed_collector_counts_as_dead(self):
        # A killed collector's segment is live until its heartbeat is 3 periods + 1 s old (PROTOCOL.md
        # §1.1); the heartbeat period is min(--interval, 1 s).
        service = unit("kepler-collect.service")["Service"]
        interval = ds.flag_value(exec_start("kepler-collect.service"), "--interval")
        seconds = float(re.fullmatch(r"([\d.]+)(ms|s)", interval).group(1)) / (1000 if interval.endswith("ms") else 1)
        restart = float(service["RestartSec"].rstrip("s"))
        self.assertGreater(restart, 3 * min(seconds, 1.0) + 1.0)

    def test_command_lines_run(self):
        name = ds.unique_name("systemd")
        collect = exec_start("kepler-collect.service")
        collect = [ds.COLLECT] + [a if not a.startswith("--shm-name") else f"--shm-name={name}" for a in collect[1:]]
        with tempfile.TemporaryDirectory() as tmp:
            estimate = [ds.ESTIMATE] + [
                f"--shm-name={name}" if a.startswith("--shm-name") else
                f"--listen=127.0.0.1:{ds.free_port()}" if a.startswith("--listen") else a
                for a in exec_start("kepler-estimate.service")[1:]] + ["--duration=2"]
            with ds.running(collect, os.path.join(tmp, "c.log")) as c:
                self.assertTrue(ds.wait_for(lambda: os.path.exists(f"/dev/shm/{name}") or c.poll() is not None, 20))
                result = subprocess.run(estimate, capture_output=True, text=True, timeout=60)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn(f"reading segment '{name}'", result.stderr)
                self.assertIsNone(c.poll())
            self.assertEqual(c.returncode, 0, "SIGTERM (KillSignal=) stops it cleanly")


if __name__ == "__main__":
    unittest.main()
