"""deploy/kubernetes: the properties deploy/README.md promises, read from the YAML, and the flags and probe
commands in it run against this build's binaries."""
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import deploy_support as ds  # noqa: E402

# The collector may not need more than these (deploy/README.md justifies each).
ALLOWED_COLLECTOR_CAPABILITIES = {"BPF", "PERFMON", "SYS_RESOURCE"}
REQUIRED_COLLECTOR_CAPABILITIES = {"BPF", "PERFMON"}
# Largest node the /dev/shm size limit is checked for: the segment has one CPU record per CPU.
MAX_NODE_CPUS = 1024
# The only peer admitted to the metrics port (common/networkpolicy.yaml explains the choice): both
# selectors in one entry, so a pod must match both.
SCRAPER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
           "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
# The estimator touches its --alive-file every second; its liveness probe allows this many seconds.
ALIVE_FILE_MAX_AGE_S = 30


def sidecar():
    return ds.kube_documents("sidecar/daemonset.yaml")[0]


def split():
    collect = ds.kube_documents("split/daemonset-collect.yaml")[0]
    estimate = ds.kube_documents("split/daemonset-estimate.yaml")[0]
    return collect, estimate


def option(command, name):
    """The value of `name` in a probe command, given as "NAME VALUE" or "NAME=VALUE"."""
    value = ds.flag_value(command[1:], name)
    if value is None and name in command:
        value = command[command.index(name) + 1]
    return value


def network_policies():
    return [(path, d) for path, d in all_manifests() if d.get("kind") == "NetworkPolicy"]


def all_manifests():
    docs = []
    for root, _, files in os.walk(ds.KUBE_DIR):
        for name in files:
            if name.endswith(".yaml"):
                docs.extend((os.path.relpath(os.path.join(root, name), ds.KUBE_DIR), d)
                            for d in ds.load_documents(os.path.join(root, name)))
    return docs


class CommonChecks:
    """Assertions shared by both topologies."""

    def check_collector(self, test, spec, c):
        sc = c["securityContext"]
        test.assertIs(sc.get("privileged", False), False, "the collector is not privileged")
        test.assertIs(sc.get("allowPrivilegeEscalation"), False)
        test.assertIs(sc.get("readOnlyRootFilesystem"), True)
        test.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        added = set(sc["capabilities"].get("add", []))
        test.assertTrue(REQUIRED_COLLECTOR_CAPABILITIES <= added, f"needs {REQUIRED_COLLECTOR_CAPABILITIES}, has {added}")
        test.assertTrue(added <= ALLOWED_COLLECTOR_CAPABILITIES, f"more capabilities than justified: {added}")
        seccomp = sc["seccompProfile"]
        test.assertEqual(seccomp["type"], "Localhost")
        test.assertTrue(os.path.isfile(os.path.join(ds.KUBE_DIR, "seccomp", seccomp["localhostProfile"])),
                        "the Localhost seccomp profile ships in deploy/kubernetes/seccomp/")
        # Host /proc and /sys: read-only, and the collector's root options point at them.
        args = c["args"]
        for option, host_path in (("--proc-root", "/proc"), ("--sysfs-root", "/sys")):
            target = ds.flag_value(args, option)
            mount = ds.mount_at(c, target)
            test.assertIsNotNone(mount, f"{option}={target} is mounted")
            test.assertIs(mount.get("readOnly"), True, f"{target} is read-only")
            test.assertEqual(ds.volume(spec, mount["name"])["hostPath"]["path"], host_path)
        test.assertIsNotNone(ds.mount_at(c, "/dev/shm"), "the collector writes /dev/shm")
        mode = int(ds.flag_value(args, "--segment-mode"), 8)
        test.assertTrue(mode & 0o040, "group may read the segment (the estimator reads it as that group)")
        test.assertFalse(mode & 0o022, "nobody but the collector may write it")
        test.assertFalse(mode & 0o004, "no world access: the group is enough")
        test.assertIs(spec.get("hostPID", False), False, "host pids come from the /proc mount, not hostPID")
        test.assertIs(spec.get("hostNetwork", False), False)
        test.assertIs(spec.get("hostIPC", False), False)

    def check_estimator(self, test, spec, e):
        sc = e["securityContext"]
        test.assertIs(sc.get("runAsNonRoot"), True)
        test.assertNotEqual(sc.get("runAsUser", 0), 0)
        test.assertIs(sc.get("readOnlyRootFilesystem"), True)
        test.assertIs(sc.get("privileged", False), False)
        test.assertIs(sc.get("allowPrivilegeEscalation"), False)
        test.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        test.assertFalse(sc["capabilities"].get("add"), "the estimator gets no capability")
        shm = ds.mount_at(e, "/dev/shm")
        test.assertIsNotNone(shm)
        test.assertIs(shm.get("readOnly"), True, "the estimator only reads the segment")
        test.assertIn(ds.flag_value(e["args"], "--listen").rsplit(":", 1)[1],
                      {str(p["containerPort"]) for p in e.get("ports", [])})
        # Models: fetched from a model server into a writable emptyDir, not from a ConfigMap (1 MiB limit).
        test.assertIsNotNone(ds.flag_value(e["args"], "--model-server"))
        model_path = ds.flag_value(e["args"], "--model").split("xgboost:", 1)[1]
        models = [m for m in e["volumeMounts"] if model_path.startswith(m["mountPath"] + "/")]
        test.assertEqual(len(models), 1, "the model directory is on a volume")
        test.assertIn("emptyDir", ds.volume(spec, models[0]["name"]), "downloads need a writable emptyDir")
        self.check_estimator_liveness(test, spec, e)

    def check_estimator_liveness(self, test, spec, e):
        """Alive while its loop touches --alive-file: not an HTTP GET, which slow clients holding every
        HTTP worker would fail, getting a working estimator killed."""
        liveness = e["livenessProbe"]
        test.assertEqual(set(liveness) & {"exec", "httpGet", "tcpSocket", "grpc"}, {"exec"})
        command = liveness["exec"]["command"]
        path = option(command, "--alive-file")
        test.assertTrue(path, "the liveness probe reads the alive file")
        test.assertEqual(path, ds.flag_value(e["args"], "--alive-file"), "the file the estimator touches")
        test.assertEqual(option(command, "--max-age"), f"{ALIVE_FILE_MAX_AGE_S}s")
        test.assertIn("--quiet", command)
        mounts = [m for m in e["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
        test.assertEqual(len(mounts), 1, "the alive file is on a volume (the root filesystem is read-only)")
        test.assertIs(mounts[0].get("readOnly", False), False, "the estimator writes it")
        test.assertIn("emptyDir", ds.volume(spec, mounts[0]["name"]), "a volume of the pod's own, not the host's")
        test.assertLess(liveness["timeoutSeconds"], ALIVE_FILE_MAX_AGE_S, "the probe answers at once")

    def check_probes(self, test, c, kinds):
        commands = ds.probe_commands(c)
        test.assertEqual(set(commands), set(kinds), f"{c['name']}: exec probes {set(commands)}")
        for command in commands.values():
            test.assertEqual(command[0], "/usr/local/bin/keplershm-probe")
            if "--alive-file" in command or any(a.startswith("--alive-file=") for a in command):
                test.assertEqual(option(command, "--alive-file"), ds.flag_value(c["args"], "--alive-file"),
                                 "the probe reads the file the container touches")
                continue
            test.assertEqual(ds.flag_value(command[1:], "--shm-name") or command[command.index("--shm-name") + 1],
                             ds.flag_value(c["args"], "--shm-name"), "the probe watches the segment the container uses")

    def check_ownership(self, test, spec, c, e):
        """The segment's group is the estimator's: through fsGroup (emptyDir) or the collector's own group."""
        estimator_groups = {e["securityContext"]["runAsGroup"]} | set(
            spec.get("securityContext", {}).get("supplementalGroups", []))
        segment_group = spec.get("securityContext", {}).get("fsGroup", c["securityContext"].get("runAsGroup"))
        test.assertIn(segment_group, estimator_groups)


class SidecarTopology(unittest.TestCase, CommonChecks):
    def setUp(self):
        self.ds = sidecar()
        self.spec = ds.pod_spec(self.ds)
        self.collect = ds.container(self.spec, "kepler-collect")
        self.estimate = ds.container(self.spec, "kepler-estimate")

    def test_shared_memory_emptydir_at_dev_shm_in_both_containers(self):
        shm = ds.volume(self.spec, ds.mount_at(self.collect, "/dev/shm")["name"])
        self.assertEqual(shm["emptyDir"]["medium"], "Memory")
        self.assertEqual(ds.mount_at(self.estimate, "/dev/shm")["name"], shm["name"])

    def test_size_limit_covers_the_segment_and_a_replacement(self):
        args = self.collect["args"]
        limit = ds.parse_quantity(ds.volume(self.spec, "shm")["emptyDir"]["sizeLimit"])
        cap = ds.parse_quantity(ds.flag_value(args, "--max-segment-bytes"))
        size = ds.segment_size(args, MAX_NODE_CPUS)
        self.assertGreaterEqual(cap, size, f"the first segment ({size} B on {MAX_NODE_CPUS} CPUs) fits the cap")
        self.assertGreaterEqual(limit, 2 * cap, "old and new generation coexist during a replacement")
        memory_limit = ds.parse_quantity(self.collect["resources"]["limits"]["memory"])
        self.assertGreater(memory_limit, limit, "the segment's pages are charged to the collector's memory")

    def test_collector_least_privilege(self):
        self.check_collector(self, self.spec, self.collect)

    def test_estimator_non_root_read_only_and_no_host_mounts(self):
        self.check_estimator(self, self.spec, self.estimate)
        host_volumes = {v["name"] for v in self.spec["volumes"] if "hostPath" in v}
        self.assertFalse({m["name"] for m in self.estimate["volumeMounts"]} & host_volumes)

    def test_no_container_is_privileged(self):
        for c in self.spec["containers"]:
            self.assertIs(c.get("securityContext", {}).get("privileged", False), False, c["name"])

    def test_segment_owner_group_and_mode_let_the_estimator_read_it(self):
        self.check_ownership(self, self.spec, self.collect, self.estimate)

    def test_probes_call_keplershm_probe(self):
        self.check_probes(self, self.collect, {"startupProbe", "livenessProbe", "readinessProbe"})
        self.check_probes(self, self.estimate, {"readinessProbe", "livenessProbe"})

    def test_service_account_token_reaches_the_collector_only(self):
        self.assertIs(self.spec["automountServiceAccountToken"], False)
        token_mounts = [c["name"] for c in self.spec["containers"]
                        if ds.mount_at(c, "/var/run/secrets/kubernetes.io/serviceaccount")]
        self.assertEqual(token_mounts, ["kepler-collect"])

    def test_prometheus_annotations_name_the_metrics_port(self):
        annotations = self.ds["spec"]["template"]["metadata"]["annotations"]
        self.assertEqual(annotations["prometheus.io/scrape"], "true")
        self.assertIn(int(annotations["prometheus.io/port"]), {p["containerPort"] for p in self.estimate["ports"]})


class SplitTopology(unittest.TestCase, CommonChecks):
    def setUp(self):
        self.collect_ds, self.estimate_ds = split()
        self.collect_spec = ds.pod_spec(self.collect_ds)
        self.estimate_spec = ds.pod_spec(self.estimate_ds)
        self.collect = ds.container(self.collect_spec, "kepler-collect")
        self.estimate = ds.container(self.estimate_spec, "kepler-estimate")

    def test_both_mount_the_same_memory_backed_host_directory_at_dev_shm(self):
        paths = []
        for spec, c in ((self.collect_spec, self.collect), (self.estimate_spec, self.estimate)):
            shm = ds.volume(spec, ds.mount_at(c, "/dev/shm")["name"])
            paths.append(shm["hostPath"]["path"])
        self.assertEqual(paths[0], paths[1])
        self.assertTrue(paths[0].startswith("/dev/shm/"), "below the host's /dev/shm, which is tmpfs everywhere")

    def test_containers_match_the_sidecar_but_for_replace_live(self):
        reference = sidecar()
        spec = ds.pod_spec(reference)
        expected = [a for a in ds.container(spec, "kepler-collect")["args"] if a != "--replace-live"]
        self.assertEqual(self.collect["args"], expected,
                         "a new collector pod may meet the old one on a node: it must not take the name")
        for key in ("securityContext", "startupProbe", "livenessProbe", "readinessProbe"):
            self.assertEqual(self.collect[key], ds.container(spec, "kepler-collect")[key], key)
            if key in self.estimate:
                self.assertEqual(self.estimate[key], ds.container(spec, "kepler-estimate")[key], key)
        self.assertEqual(self.estimate["args"], ds.container(spec, "kepler-estimate")["args"])

    def test_least_privilege(self):
        self.check_collector(self, self.collect_spec, self.collect)
        self.check_estimator(self, self.estimate_spec, self.estimate)
        host_mounts = [m for m in self.estimate["volumeMounts"]
                       if "hostPath" in ds.volume(self.estimate_spec, m["name"])]
        self.assertEqual([m["mountPath"] for m in host_mounts], ["/dev/shm"], "the shared directory only")
        self.assertIs(self.estimate_spec["automountServiceAccountToken"], False)

    def test_segment_owner_group_and_mode_let_the_estimator_read_it(self):
        # hostPath directories get no fsGroup: the collector's own group must be the estimator's.
        self.assertNotIn("fsGroup", self.collect_spec.get("securityContext", {}))
        self.assertEqual(self.collect["securityContext"]["runAsGroup"], self.estimate["securityContext"]["runAsGroup"])

    def test_probes_call_keplershm_probe(self):
        self.check_probes(self, self.collect, {"startupProbe", "livenessProbe", "readinessProbe"})
        self.check_probes(self, self.estimate, {"readinessProbe", "livenessProbe"})


def readme_segment_size(processes, workloads, strings, slots, cpus):
    """The formula deploy/README.md gives for ABI 1.0 (78 schema fields, 32 zones)."""
    def align(value, to):
        return (value + to - 1) // to * to
    slot = 64 + 1856 + align(80 * cpus, 64) + 768 * workloads + 192 * processes + align(strings, 64)
    return align(4096 + 64 * 78, 4096) + slots * slot


class SegmentSizeFormula(unittest.TestCase):
    def test_readme_formula_is_the_librarys(self):
        for processes, workloads, strings, slots, cpus in ((4096, 512, 65536, 8, 2), (4096, 512, 65536, 8, 1024),
                                                            (1, 1, 256, 2, 1), (777, 33, 1000, 5, 3)):
            args = [f"--process-capacity={processes}", f"--workload-capacity={workloads}",
                    f"--string-capacity={strings}", f"--slots={slots}"]
            self.assertEqual(readme_segment_size(processes, workloads, strings, slots, cpus),
                             ds.segment_size(args, cpus), (processes, workloads, strings, slots, cpus))
        with open(os.path.join(ds.DEPLOY_DIR, "README.md")) as f:
            readme = f.read()
        for cpus in (2, 64, 256, 1024):
            self.assertIn(f"{ds.segment_size(sidecar_collector_args(), cpus):,} B", readme,
                          f"the README's table, {cpus} CPUs, is this library's figure")


def sidecar_collector_args():
    return ds.container(ds.pod_spec(sidecar()), "kepler-collect")["args"]


class ClusterObjects(unittest.TestCase):
    def test_rbac_grants_only_get_list_watch_on_pods(self):
        docs = ds.kube_documents("common/rbac.yaml")
        role = next(d for d in docs if d["kind"] == "ClusterRole")
        self.assertEqual(role["rules"], [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}])
        binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
        account = next(d for d in docs if d["kind"] == "ServiceAccount")
        self.assertEqual(binding["roleRef"]["name"], role["metadata"]["name"])
        self.assertEqual(binding["subjects"][0]["name"], account["metadata"]["name"])
        self.assertEqual(ds.pod_spec(sidecar())["serviceAccountName"], account["metadata"]["name"])
        self.assertIs(account["automountServiceAccountToken"], False)
        for path, doc in all_manifests():
            self.assertNotIn(doc.get("kind"), {"Role", "RoleBinding"}, path)
            if doc.get("kind") == "ClusterRole":
                self.assertEqual(doc["metadata"]["name"], role["metadata"]["name"], f"{path}: one role only")

    def test_service_and_service_monitor_select_the_estimators(self):
        service = ds.kube_documents("common/service.yaml")[0]
        monitor = ds.kube_documents("servicemonitor.yaml")[0]
        self.assertEqual(service["spec"].get("clusterIP"), "None", "headless: every node's estimator is scraped")
        estimator_pods = [sidecar(), split()[1]]
        collector_only = split()[0]
        labels_of = lambda d: d["spec"]["template"]["metadata"]["labels"]  # noqa: E731
        selects = lambda d: all(labels_of(d).get(k) == v for k, v in service["spec"]["selector"].items())  # noqa: E731
        for d in estimator_pods:
            self.assertTrue(selects(d), d["metadata"]["name"])
            port_names = {p["name"] for p in ds.container(ds.pod_spec(d), "kepler-estimate")["ports"]}
            self.assertIn(service["spec"]["ports"][0]["targetPort"], port_names)
        self.assertFalse(selects(collector_only), "collector-only pods serve no metrics")
        self.assertTrue(all(service["metadata"]["labels"].get(k) == v
                            for k, v in monitor["spec"]["selector"]["matchLabels"].items()))
        self.assertEqual(monitor["spec"]["endpoints"][0]["port"], service["spec"]["ports"][0]["name"])
        self.assertEqual(service["metadata"]["annotations"]["prometheus.io/port"], str(service["spec"]["ports"][0]["port"]))

    def test_no_configmap_carries_models_and_namespaces_agree(self):
        for path, doc in all_manifests():
            self.assertNotEqual(doc.get("kind"), "ConfigMap", f"{path}: models do not fit ConfigMaps (1 MiB)")
            if doc.get("kind") in {"DaemonSet", "Service", "ServiceAccount", "ServiceMonitor", "NetworkPolicy"}:
                self.assertEqual(doc["metadata"]["namespace"], "keplershm", path)

    def test_every_estimator_liveness_probe_reads_the_alive_file(self):
        estimators = [(path, c) for path, d in all_manifests() if d.get("kind") == "DaemonSet"
                      for c in ds.pod_spec(d).get("containers", []) if c["name"] == "kepler-estimate"]
        self.assertGreaterEqual(len(estimators), 2, "the sidecar's and the split topology's")
        for path, c in estimators:
            if "livenessProbe" in c:  # the feed overlay's patch keeps the base's probe
                self.assertNotIn("httpGet", c["livenessProbe"], path)
                self.assertEqual(option(c["livenessProbe"]["exec"]["command"], "--alive-file"),
                                 ds.flag_value(c["args"], "--alive-file"), path)
            self.assertTrue(ds.flag_value(c["args"], "--alive-file"), f"{path}: the estimator touches the file")

    def test_network_policy_admits_only_the_scraper_to_the_metrics_port(self):
        self.assertIn("networkpolicy.yaml", ds.kube_documents("common/kustomization.yaml")[0]["resources"])
        policy = ds.kube_documents("common/networkpolicy.yaml")[0]
        self.assertEqual(policy["kind"], "NetworkPolicy")
        selects = lambda d: all(d["spec"]["template"]["metadata"]["labels"].get(k) == v  # noqa: E731
                                for k, v in policy["spec"]["podSelector"]["matchLabels"].items())
        for d in (sidecar(), *split()):
            self.assertTrue(selects(d), f"{d['metadata']['name']}: every keplershm pod is selected")
        self.assertIn("Ingress", policy["spec"]["policyTypes"])
        [rule] = policy["spec"]["ingress"]
        self.assertEqual(rule["from"], [SCRAPER])
        self.assertEqual(rule["ports"], [{"port": "http-metrics", "protocol": "TCP"}])
        service = ds.kube_documents("common/service.yaml")[0]
        self.assertEqual(service["spec"]["ports"][0]["targetPort"], "http-metrics")
        for d in (sidecar(), split()[1]):
            ports = {p["name"]: p["containerPort"] for p in ds.container(ds.pod_spec(d), "kepler-estimate")["ports"]}
            self.assertIn("http-metrics", ports, "the policy's named port is the estimator's")

    def test_network_policy_admits_only_feed_clients_to_the_feed_port(self):
        self.assertIn("networkpolicy.yaml", ds.kube_documents("feed/kustomization.yaml")[0]["resources"])
        policy = ds.kube_documents("feed/networkpolicy.yaml")[0]
        labels = sidecar()["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(all(labels.get(k) == v for k, v in policy["spec"]["podSelector"]["matchLabels"].items()),
                        "selects the pods the feed overlay patches")
        [rule] = policy["spec"]["ingress"]
        feed = ds.container(ds.pod_spec(ds.kube_documents("feed/daemonset-feed.yaml")[0]), "kepler-feed")
        self.assertEqual(rule["ports"], [{"port": feed["ports"][0]["name"], "protocol": "TCP"}])
        self.assertEqual([p["name"] for p in feed["ports"]], ["grpc-feed"])
        self.assertEqual(rule["from"], [{"namespaceSelector": {"matchLabels": {"keplershm/feed-clients": "true"}},
                                         "podSelector": {"matchLabels": {"keplershm/feed-client": "true"}}}])

    def test_no_network_policy_admits_everyone(self):
        """An ingress rule without `from` or `ports`, an empty selector or an ipBlock admits far more than
        the scraper or the feed's clients."""
        policies = network_policies()
        self.assertGreaterEqual(len(policies), 2)
        for path, policy in policies:
            self.assertTrue(policy["spec"]["podSelector"].get("matchLabels"), f"{path}: selects keplershm pods only")
            for rule in policy["spec"].get("ingress", []):
                self.assertTrue(rule.get("from"), f"{path}: a rule without from admits every source")
                self.assertTrue(rule.get("ports"), f"{path}: a rule without ports admits every port")
                for peer in rule["from"]:
                    self.assertEqual(set(peer), {"namespaceSelector", "podSelector"}, path)
                    self.assertTrue(peer["namespaceSelector"].get("matchLabels"), path)
                    self.assertTrue(peer["podSelector"].get("matchLabels"), path)

    def test_kustomizations_list_existing_resources(self):
        for path, doc in all_manifests():
            if doc.get("kind") != "Kustomization":
                continue
            base = os.path.dirname(os.path.join(ds.KUBE_DIR, path))
            for resource in doc["resources"]:
                target = os.path.normpath(os.path.join(base, resource))
                self.assertTrue(os.path.isfile(target) or os.path.isfile(os.path.join(target, "kustomization.yaml")),
                                f"{path}: {resource}")
                self.assertTrue(target.startswith(ds.KUBE_DIR), f"{path}: {resource} leaves deploy/kubernetes")
                if os.path.isfile(target):
                    self.assertEqual(os.path.dirname(target), base,
                                     f"{path}: kustomize loads files only below its own directory")


class ManifestsAgainstTheBinaries(unittest.TestCase):
    """Every option in the manifests exists, and the containers' command lines really run."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def containers(self):
        spec = ds.pod_spec(sidecar())
        collect_ds, estimate_ds = split()
        return [ds.container(spec, "kepler-collect"), ds.container(spec, "kepler-estimate"),
                ds.container(ds.pod_spec(collect_ds), "kepler-collect"),
                ds.container(ds.pod_spec(estimate_ds), "kepler-estimate")]

    def test_every_option_exists(self):
        known = {"kepler-collect": ds.help_options(ds.COLLECT), "kepler-estimate": ds.help_options(ds.ESTIMATE)}
        probe = ds.help_options(ds.PROBE)
        for c in self.containers():
            for arg in c["args"]:
                self.assertIn(ds.split_flag(arg)[0], known[c["name"]], f"{c['name']}: {arg}")
            for command in ds.probe_commands(c).values():
                for arg in command[1:]:
                    if arg.startswith("--"):
                        self.assertIn(ds.split_flag(arg)[0], probe, f"probe: {arg}")

    def local_args(self, args, name, overrides):
        """The manifest's arguments with host paths and cluster services replaced by this machine's, and
        `overrides` ({flag: value}) replacing or adding options."""
        local = {"--proc-root": "/proc", "--sysfs-root": "/sys", "--kube": "off", "--shm-name": name,
                 "--node-name": "test-node", "--listen": f"127.0.0.1:{ds.free_port()}",
                 "--model-server": "http://127.0.0.1:9/models", **overrides}
        replaced = []
        for arg in args:
            flag, value = ds.split_flag(arg)
            value = local.pop(flag, value)
            if flag == "--model":
                value = value.replace("/var/lib/kepler-estimate/models", self.tmp.name)
            replaced.append(flag if value is None else f"{flag}={value}")
        return replaced + [f"{flag}={value}" for flag, value in overrides.items() if flag in local]

    def test_command_lines_run_and_the_probes_judge_their_segment(self):
        spec = ds.pod_spec(sidecar())
        c, e = ds.container(spec, "kepler-collect"), ds.container(spec, "kepler-estimate")
        name = ds.unique_name("manifest")
        probe_lines = {kind: [ds.PROBE] + [a if a != "keplershm" else name for a in command[1:]]
                       for kind, command in ds.probe_commands(c).items()}
        for command in probe_lines.values():
            self.assertEqual(subprocess.run(command, capture_output=True).returncode, 1, "no segment yet: unhealthy")
        collect_argv = [ds.COLLECT] + self.local_args(c["args"], name, {"--interval": "200ms"})
        alive_file = os.path.join(self.tmp.name, "estimate.alive")
        estimate_argv = [ds.ESTIMATE] + self.local_args(e["args"], name, {"--duration": "3", "--alive-file": alive_file})
        manifest_alive_file = option(e["livenessProbe"]["exec"]["command"], "--alive-file")
        liveness = [ds.PROBE] + [alive_file if a == manifest_alive_file else a
                                 for a in e["livenessProbe"]["exec"]["command"][1:]]
        self.assertEqual(subprocess.run(liveness, capture_output=True).returncode, 1, "no alive file yet")
        with ds.running(collect_argv, os.path.join(self.tmp.name, "collect.log")) as collector:
            self.assertTrue(ds.wait_for(lambda: os.path.exists(f"/dev/shm/{name}") or collector.poll() is not None, 20))
            estimator = subprocess.run(estimate_argv, capture_output=True, text=True, timeout=60)
            self.assertEqual(estimator.returncode, 0, estimator.stderr)
            result = subprocess.run(liveness, capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, f"estimator liveness: {result.stderr}")
            stale = time.time() - 2 * ALIVE_FILE_MAX_AGE_S
            os.utime(alive_file, (stale, stale))
            self.assertEqual(subprocess.run(liveness, capture_output=True).returncode, 1, "an old alive file")
            for kind, command in probe_lines.items():
                result = subprocess.run(command, capture_output=True, text=True)
                self.assertEqual(result.returncode, 0, f"{kind}: {result.stderr}")
            self.assertIsNone(collector.poll(), open(os.path.join(self.tmp.name, "collect.log")).read())
        self.assertEqual(collector.returncode, 0, "SIGTERM: a clean stop")
        for kind, command in probe_lines.items():
            self.assertEqual(subprocess.run(command, capture_output=True).returncode, 1, f"{kind}: stopped collector")


class SegmentOwnership(unittest.TestCase):
    """The pod's users for real: collector uid 0 with the pod's group, estimator a non-root user of it."""

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to run the two containers' users (setpriv)")
        self.tmp = tempfile.TemporaryDirectory()
        os.chmod(self.tmp.name, 0o777)  # the non-root estimator writes its metrics file here

    def tearDown(self):
        self.tmp.cleanup()

    def run_estimator(self, name, uid, gid):
        metrics = os.path.join(self.tmp.name, f"metrics-{gid}.prom")
        argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", ds.ESTIMATE,
                f"--shm-name={name}", "--listen=none", "--duration=2", f"--prom-out={metrics}"]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        frames = 0
        if os.path.exists(metrics):
            with open(metrics) as f:
                found = re.search(r"^kepler_estimator_frames_read_total (\S+)$", f.read(), re.M)
                frames = float(found.group(1)) if found else 0
        return result, frames

    def test_non_root_estimator_in_the_segment_group_reads_frames(self):
        spec = ds.pod_spec(sidecar())
        c, e = ds.container(spec, "kepler-collect"), ds.container(spec, "kepler-estimate")
        group = spec["securityContext"]["fsGroup"]
        name = ds.unique_name("ownership")
        collect = ["setpriv", f"--regid={group}", "--clear-groups", "--", ds.COLLECT, f"--shm-name={name}",
                   f"--segment-mode={ds.flag_value(c['args'], '--segment-mode')}", "--interval=200ms", "--kube=off"]
        with ds.running(collect, os.path.join(self.tmp.name, "collect.log")):
            self.assertTrue(ds.wait_for(lambda: os.path.exists(f"/dev/shm/{name}"), 20))
            st = os.stat(f"/dev/shm/{name}")
            self.assertEqual((st.st_uid, st.st_gid), (0, group))
            result, frames = self.run_estimator(name, e["securityContext"]["runAsUser"], e["securityContext"]["runAsGroup"])
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertGreater(frames, 0, result.stderr)
            # Another non-root user outside the group: refused by the file mode, said clearly, no crash.
            result, frames = self.run_estimator(name, 65534, 65534)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(frames, 0)
            self.assertIn("ermission denied", result.stderr)


class FeedOverlay(unittest.TestCase):
    """deploy/kubernetes/feed: the optional kepler-feed container reads like the estimator (read-only,
    unprivileged) and never serves frames off the pod without TLS and a token."""

    def setUp(self):
        self.patch = ds.kube_documents("feed/daemonset-feed.yaml")[0]
        self.spec = ds.pod_spec(self.patch)
        self.feed = ds.container(self.spec, "kepler-feed")

    def test_patches_the_sidecar_daemonset(self):
        base = sidecar()
        self.assertEqual((self.patch["kind"], self.patch["metadata"]["name"], self.patch["metadata"]["namespace"]),
                         (base["kind"], base["metadata"]["name"], base["metadata"]["namespace"]))
        kustomization = ds.kube_documents("feed/kustomization.yaml")[0]
        self.assertIn("../sidecar", kustomization["resources"])
        self.assertEqual([p["path"] for p in kustomization["patches"]], ["daemonset-feed.yaml"])

    def test_unprivileged_read_only_reader(self):
        sc = self.feed["securityContext"]
        self.assertIs(sc["runAsNonRoot"], True)
        self.assertEqual((sc["runAsUser"], sc["runAsGroup"]), (65532, 65532))
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertIs(sc["readOnlyRootFilesystem"], True)
        self.assertEqual(sc["capabilities"], {"drop": ["ALL"]})
        self.assertIs(ds.mount_at(self.feed, "/dev/shm")["readOnly"], True)

    def test_off_pod_listener_has_tls_and_a_token_from_secrets(self):
        args = self.feed["args"]
        self.assertFalse(ds.flag_value(args, "--listen").startswith("127."), "listens for other nodes")
        for flag in ("--tls-cert", "--tls-key", "--token-file"):
            path = ds.flag_value(args, flag)
            self.assertTrue(path, flag)
            mount = next(m for m in self.feed["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
            self.assertIs(mount["readOnly"], True, flag)
            self.assertIn("secret", ds.volume(self.spec, mount["name"]), f"{flag} comes from a Secret")

    def test_service_port_names_the_container_port(self):
        service = ds.kube_documents("feed/service.yaml")[0]
        ports = {p["name"]: p["containerPort"] for p in self.feed["ports"]}
        for port in service["spec"]["ports"]:
            self.assertEqual(ports[port["targetPort"]], port["port"])
            self.assertEqual(port["port"], int(ds.flag_value(self.feed["args"], "--listen").rsplit(":", 1)[1]))

    def test_the_feed_joins_every_model_the_estimator_publishes(self):
        base = ds.container(ds.pod_spec(sidecar()), "kepler-estimate")
        estimator = ds.container(self.spec, "kepler-estimate")
        prefix = ds.flag_value(estimator["args"], "--publish-estimates")
        self.assertTrue(prefix)
        self.assertEqual([a for a in estimator["args"] if not a.startswith("--publish-estimates")], base["args"],
                         "the patch repeats the base's args (strategic merge replaces the list)")
        # kepler-estimate always has `measured` and `curve` beside its --model list (model_spec.cpp).
        models = [ds.split_flag(a)[1].split("=", 1)[0] for a in base["args"] if a.startswith("--model=")]
        expected = {f"{prefix}-{m}" for m in models + ["measured", "curve"]}
        joined = {ds.split_flag(a)[1] for a in self.feed["args"] if a.startswith("--estimates=")}
        self.assertEqual(joined, expected)

    def test_only_the_overlay_lets_the_estimator_write_shared_memory(self):
        self.assertIs(ds.mount_at(ds.container(self.spec, "kepler-estimate"), "/dev/shm")["readOnly"], False)
        self.assertIs(ds.mount_at(ds.container(ds.pod_spec(sidecar()), "kepler-estimate"), "/dev/shm")["readOnly"], True)

    def test_every_option_exists(self):
        feed = os.environ.get("KEPLERSHM_FEED")
        if not feed:
            self.skipTest("kepler-feed is not built in this configuration")
        known = ds.help_options(feed)
        for arg in self.feed["args"]:
            self.assertIn(ds.split_flag(arg)[0], known, arg)
        known = ds.help_options(ds.ESTIMATE)
        for arg in ds.container(self.spec, "kepler-estimate")["args"]:
            self.assertIn(ds.split_flag(arg)[0], known, arg)


if __name__ == "__main__":
    unittest.main()
