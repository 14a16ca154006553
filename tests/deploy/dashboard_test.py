"""deploy/grafana: the dashboard is valid and every metric it queries is one the estimator really exports
(scraped from this build's collector and estimator on a fake RAPL meter, so meter-only series exist too),
or a zone series kepler-estimate/README.md documents that this machine cannot produce."""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import deploy_support as ds  # noqa: E402

DASHBOARD = os.path.join(ds.DEPLOY_DIR, "grafana", "keplershm-dashboard.json")
# kepler-estimate/README.md: kepler_node_<zone>_joules_total, zones as in Kepler 0.7.
DOCUMENTED_ZONE_SERIES = re.compile(r"kepler_node_(package|core|uncore|dram|other|gpu|platform)_joules_total")
RAPL_ZONES = {"intel-rapl:0": "package-0", "intel-rapl:0:0": "core", "intel-rapl:0:1": "dram",
              "intel-rapl:0:2": "uncore", "intel-rapl:1": "psys"}


def write_fake_rapl(root):
    for i, (zone, name) in enumerate(RAPL_ZONES.items()):
        path = os.path.join(root, "class", "powercap", zone)
        os.makedirs(path)
        for file, value in (("name", name), ("energy_uj", str(1_000_000 * (i + 1))),
                            ("max_energy_range_uj", "262143328850")):
            with open(os.path.join(path, file), "w") as f:
                f.write(value + "\n")


def advance_counters(root, stop):
    """Each zone draws a different, steady power so the counters are never mirrors of each other."""
    while not stop.is_set():
        for i, zone in enumerate(RAPL_ZONES):
            path = os.path.join(root, "class", "powercap", zone, "energy_uj")
            with open(path) as f:
                value = int(f.read())
            with open(path + ".tmp", "w") as f:
                f.write(f"{value + 1000 * (i + 3)}\n")
            os.replace(path + ".tmp", path)
        time.sleep(0.01)


def queried_metrics(dashboard):
    names = set()
    panels = list(dashboard["panels"])
    while panels:
        panel = panels.pop()
        panels.extend(panel.get("panels", []))
        for target in panel.get("targets", []):
            names.update(re.findall(r"\bkepler_[a-z0-9_]+", target["expr"]))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            names.update(re.findall(r"\bkepler_[a-z0-9_]+", variable["definition"]))
    return names


class GrafanaDashboard(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(DASHBOARD) as f:
            cls.dashboard = json.load(f)

    def test_structure(self):
        d = self.dashboard
        self.assertTrue(d["uid"] and d["title"])
        ids = [p["id"] for p in d["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids are unique")
        for panel in d["panels"]:
            if panel["type"] == "row":
                continue
            self.assertEqual(panel["datasource"]["uid"], "${datasource}", panel["title"])
            self.assertTrue(panel["targets"], panel["title"])
            for target in panel["targets"]:
                self.assertEqual(target["expr"].count("("), target["expr"].count(")"), target["expr"])
        self.assertTrue(any(v["type"] == "datasource" for v in d["templating"]["list"]))

    def test_covers_nodes_containers_models_and_health(self):
        names = queried_metrics(self.dashboard)
        for required in ("kepler_node_package_joules_total", "kepler_container_joules_total", "kepler_model_info",
                         "kepler_model_node_watts", "kepler_estimator_frames_read_total",
                         "kepler_estimator_frames_missed_total"):
            self.assertIn(required, names)

    def test_every_queried_metric_is_exported(self):
        with tempfile.TemporaryDirectory() as tmp:
            sysfs = os.path.join(tmp, "sys")
            write_fake_rapl(sysfs)
            stop = threading.Event()
            updater = threading.Thread(target=advance_counters, args=(sysfs, stop))
            updater.start()
            # A small XGBoost model on Kepler's nx12 data whose metadata carries an expected error, so that
            # kepler_model_expected_error_watts (the error panel's second query) is exported too.
            model = os.path.join(tmp, "model")
            subprocess.run([sys.executable, os.path.join(ds.SOURCE_DIR, "tests", "kepler-estimate", "train_model.py"),
                            "--data", os.path.join(ds.SOURCE_DIR, "tests", "data", "kepler-model-db"), "--out", model,
                            "--rounds", "10", "--expected-error-w", "6"], check=True, stdout=subprocess.DEVNULL)
            name, port = ds.unique_name("dashboard"), ds.free_port()
            collect = [ds.COLLECT, f"--shm-name={name}", "--interval=200ms", "--source=procfs", "--kube=off",
                       f"--sysfs-root={sysfs}"]
            estimate = [ds.ESTIMATE, f"--shm-name={name}", f"--listen=127.0.0.1:{port}", "--process-metrics",
                        f"--model=xgb=xgboost:{model}"]
            try:
                with ds.running(collect, os.path.join(tmp, "c.log")), ds.running(estimate, os.path.join(tmp, "e.log")):
                    exported = set()
                    deadline = time.monotonic() + 20
                    while time.monotonic() < deadline and "kepler_model_mape_ratio" not in exported:
                        time.sleep(0.5)
                        try:
                            exported = ds.metric_names(ds.scrape(port))
                        except OSError:
                            continue
            finally:
                stop.set()
                updater.join()
            self.assertIn("kepler_node_dram_joules_total", exported, open(os.path.join(tmp, "c.log")).read())
        missing = {n for n in queried_metrics(self.dashboard)
                   if n not in exported and not DOCUMENTED_ZONE_SERIES.fullmatch(n)}
        self.assertEqual(missing, set(), f"queried but never exported; exported: {sorted(exported)}")


if __name__ == "__main__":
    unittest.main()
