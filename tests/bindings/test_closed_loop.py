"""Closed loop: the real collector on a fake RAPL tree → record → train → kepler-estimate --model → the
estimator's node predictions equal the ones Python computes from the same recording and model.

Needs build/bin/kepler-collect and kepler-estimate (CTest passes their paths as KEPLER_COLLECT and
KEPLER_ESTIMATE when the targets exist); without them it skips and says why. The second half of the
loop (train → estimator agrees with Python) also runs on a synthetic recording, needing only the
estimator.
"""
import csv
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict

import pytest

import keplershm
from keplershm import dataset, model, train

PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def tool(name):
    path = os.environ.get(name.upper().replace("-", "_")) or os.path.join(ROOT, "build", "bin", name)
    if not os.access(path, os.X_OK):
        pytest.skip("%s is not built (looked for %s): the closed loop needs the real collector and estimator"
                    % (name, path))
    return path


def fake_rapl(root):
    """<root>/class/powercap with one package (and its dram subzone); energy advanced by a thread."""
    zones = {"intel-rapl:0": "package-0", "intel-rapl:0:0": "dram"}
    for zone, name in zones.items():
        d = os.path.join(root, "class", "powercap", zone)
        os.makedirs(d)
        open(os.path.join(d, "name"), "w").write(name + "\n")
        open(os.path.join(d, "max_energy_range_uj"), "w").write("262143328850\n")
        open(os.path.join(d, "energy_uj"), "w").write("0\n")
    stop = threading.Event()

    def advance():
        energy = {z: 0.0 for z in zones}
        last = time.monotonic()
        while not stop.is_set():
            time.sleep(0.02)
            now = time.monotonic()
            watts = {"intel-rapl:0": 40 + 25 * math.sin(now / 3), "intel-rapl:0:0": 6 + 2 * math.cos(now / 5)}
            for z in zones:
                energy[z] += watts[z] * (now - last) * 1e6
                path = os.path.join(root, "class", "powercap", z, "energy_uj")
                with open(path + ".tmp", "w") as f:
                    f.write("%d\n" % energy[z])
                os.replace(path + ".tmp", path)
            last = now

    thread = threading.Thread(target=advance, daemon=True)
    thread.start()
    return stop, thread


def busy(stop):
    """Some CPU load that varies, so the features move."""
    while not stop.is_set():
        end = time.monotonic() + 0.05 * (1 + math.sin(time.monotonic()))
        while time.monotonic() < end:
            pass
        time.sleep(0.05)


def assert_estimator_agrees(estimate, rec, tmp_path, candidate=None):
    """Train on `rec` (only `candidate`, if named), replay it through kepler-estimate, and compare node
    package watts per frame."""
    model_dir = str(tmp_path / "loop-xgb")
    only = ["--candidates", candidate] if candidate else []
    trained = subprocess.run([PYTHON, "-m", "keplershm", "train", rec, "--out", model_dir, "--rounds", "30", *only],
                             capture_output=True, text=True, timeout=300)
    assert trained.returncode == 0, trained.stderr

    out_csv = str(tmp_path / "estimates.csv")
    replay = subprocess.run([estimate, "--replay", rec, "--model", "loop=xgboost:" + model_dir, "--primary", "loop",
                             "--csv", out_csv, "--quiet"], capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stderr

    table = dataset.load(rec)
    python_watts = model.load_model(model_dir).predict(table)["package"]
    ours = dict(zip(table.sequence.tolist(), python_watts.tolist()))
    theirs = defaultdict(float)
    seconds = {}
    for r in csv.DictReader(open(out_csv)):
        if r["level"] == "node" and r["zone"] == "package" and r["model"] == "loop":
            seq = int(r["sequence"])
            theirs[seq] += float(r["dynamic_joules"]) + float(r["idle_joules"])
            seconds[seq] = (int(r["interval_end_ns"]) - int(r["interval_start_ns"])) / 1e9
    common = sorted(set(theirs) & set(ours))
    assert len(common) >= 0.8 * len(ours), "estimator answered %d of %d frames" % (len(common), len(ours))
    for seq in common:
        estimator_watts = theirs[seq] / seconds[seq]
        # Joules are printed to the microjoule: allow that rounding on top of 1e-4 relative.
        assert estimator_watts == pytest.approx(ours[seq], rel=1e-4, abs=2e-6 / seconds[seq]), seq
    return len(common)


def test_estimator_agrees_with_python_on_a_synthetic_recording(recording, tmp_path):
    assert assert_estimator_agrees(tool("kepler-estimate"), recording, tmp_path) >= 192


@pytest.mark.parametrize("candidate", list(train.CANDIDATES))
def test_estimator_serves_every_candidate_as_python_predicts(recording, tmp_path, candidate):
    # Whichever candidate train chooses on a user's data, kepler-estimate must serve it exactly.
    assert assert_estimator_agrees(tool("kepler-estimate"), recording, tmp_path, candidate) >= 192


def test_estimator_predictions_equal_pythons(tmp_path, shm_name):
    collect, estimate = tool("kepler-collect"), tool("kepler-estimate")
    # A quarter-second interval: 8 s give ~32 frames.
    args = [collect, "--shm-name", shm_name, "--sysfs-root", str(tmp_path / "sys"), "--interval", "250ms"]
    seconds = 8

    stop_rapl, _ = fake_rapl(str(tmp_path / "sys"))
    stop_load = threading.Event()
    load = threading.Thread(target=busy, args=(stop_load,), daemon=True)
    load.start()
    rec = str(tmp_path / "collector.kshm")
    collector = None
    try:
        log = open(str(tmp_path / "collect.log"), "w")  # a file, not a pipe: a chatty collector never blocks
        collector = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not os.path.exists("/dev/shm/" + shm_name) and collector.poll() is None:
            assert time.monotonic() < deadline, "kepler-collect created no segment in 20 s"
            time.sleep(0.1)
        assert collector.poll() is None, "kepler-collect exited: %s" % open(str(tmp_path / "collect.log")).read()
        result = keplershm.record(shm_name, rec, duration_s=seconds)
    finally:
        if collector is not None and collector.poll() is None:
            collector.send_signal(signal.SIGTERM)
            try:
                collector.wait(timeout=10)
            except subprocess.TimeoutExpired:
                collector.kill()
        stop_rapl.set()
        stop_load.set()
    assert result.frames >= 12, "only %d frames recorded in %d s" % (result.frames, seconds)

    assert_estimator_agrees(estimate, rec, tmp_path)
