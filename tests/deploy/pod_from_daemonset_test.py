"""deploy/containers/pod_from_daemonset.py: the Pod run.sh gives `podman kube play` is the DaemonSet's pod
template, changed only where its docstring says. Runs without podman or root (deploy.containers runs the
Pod for real)."""
import copy
import os
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(__file__))
import deploy_support as ds  # noqa: E402

SCRIPT = os.path.join(ds.DEPLOY_DIR, "containers", "pod_from_daemonset.py")
DAEMONSET = os.path.join(ds.KUBE_DIR, "sidecar", "daemonset.yaml")


class PodFromDaemonSet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.template = ds.kube_documents("sidecar/daemonset.yaml")[0]["spec"]["template"]
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run(["/usr/bin/python3", SCRIPT, DAEMONSET, "--pod-name", "p1", "--metrics-port", "12345",
                                  "--node-name", "node-a", "--volumes", f"{tmp}/volumes", "--probes", f"{tmp}/probes"],
                                 capture_output=True, text=True, check=True).stdout
            with open(f"{tmp}/volumes") as f:
                cls.volumes = [line.split() for line in f.read().splitlines()]
            with open(f"{tmp}/probes") as f:
                cls.probes = [line.split(" ", 3) for line in f.read().splitlines()]
        cls.pod = yaml.safe_load(out)

    def containers(self):
        return zip(self.template["spec"]["containers"], self.pod["spec"]["containers"])

    def test_only_the_documented_changes(self):
        expected = copy.deepcopy(self.template["spec"])
        expected["nodeName"] = "node-a"
        expected["volumes"] = [v for v in expected["volumes"] if v["name"] != "kube-api-access"]
        for volume in expected["volumes"]:
            if "emptyDir" in volume:
                del volume["emptyDir"]
                volume["persistentVolumeClaim"] = {"claimName": f"p1-{volume['name']}"}
        for container in expected["containers"]:
            container["args"] = [a.replace("$(NODE_NAME)", "node-a").replace("--kube=api", "--kube=off")
                                 for a in container["args"]]
            container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != "kube-api-access"]
            for env in container.get("env", []):
                if "valueFrom" in env:
                    env.pop("valueFrom")
                    env["value"] = "node-a"
            del container["securityContext"]["seccompProfile"]
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                if "httpGet" in container.get(probe, {}):
                    del container[probe]
            for port in container.get("ports", []):
                port["hostPort"] = 12345
        self.assertEqual(self.pod["spec"], expected)
        self.assertEqual(self.pod["metadata"]["labels"], self.template["metadata"]["labels"])

    def test_seccomp_profiles_become_podmans_annotations(self):
        annotations = self.pod["metadata"]["annotations"]
        for original, _ in self.containers():
            profile = original["securityContext"]["seccompProfile"]
            value = annotations[f"container.seccomp.security.alpha.kubernetes.io/{original['name']}"]
            if profile["type"] == "Localhost":
                self.assertEqual(value, "localhost/" + profile["localhostProfile"])
                self.assertTrue(os.path.isfile(os.path.join(ds.KUBE_DIR, "seccomp", profile["localhostProfile"])))
            else:
                self.assertEqual(value, "runtime/default")

    def test_shared_memory_is_a_tmpfs_of_the_size_limit_in_the_fs_group(self):
        shm = ds.volume(self.template["spec"], "shm")
        self.assertIn(["p1-shm", "tmpfs", str(ds.parse_quantity(shm["emptyDir"]["sizeLimit"])),
                       str(self.template["spec"]["securityContext"]["fsGroup"])], self.volumes)
        self.assertIn(["p1-models", "disk"], self.volumes)
        # The estimator's alive file (its liveness): a tmpfs the estimator, gid 65532, may write through the group.
        alive = ds.volume(self.template["spec"], "estimate-run")
        self.assertIn(["p1-estimate-run", "tmpfs", str(ds.parse_quantity(alive["emptyDir"]["sizeLimit"])),
                       str(self.template["spec"]["securityContext"]["fsGroup"])], self.volumes)

    def test_every_probe_is_run_by_run_sh(self):
        for original, _ in self.containers():
            for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                if kind not in original:
                    continue
                line = next(p for p in self.probes if p[0] == original["name"] and p[1] == kind)
                if "exec" in original[kind]:
                    self.assertEqual(line[2:], ["exec", " ".join(original[kind]["exec"]["command"])])
                else:
                    self.assertEqual(line[2:], ["httpGet", original[kind]["httpGet"]["path"]])


if __name__ == "__main__":
    unittest.main()
