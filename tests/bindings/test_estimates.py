"""The estimates channel from Python: publish_estimates, `python3 -m keplershm serve-model`, the example
linear model (answers read back through the C reader); the estimator's side is in test_estimates_import.py."""
import json
import math
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

import keplershm
import synthetic
from keplershm import EstimatesWriter, publish_estimates
from keplershm.features import node_features
from keplershm.model import CurveModel
from keplershm.serve import frame_table

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)
NO = 0xFFFFFFFF


@pytest.fixture
def out_name(shm_name):
    name = shm_name + "-est"
    yield name
    try:
        os.unlink("/dev/shm/" + name)
    except FileNotFoundError:
        pass


def one_frame(shm_name, n=3, workloads=3):
    """Frame n of a synthetic collector as the reader delivers it (1 s interval), said to have `workloads`."""
    with synthetic.make_writer(shm_name) as writer, keplershm.Reader(shm_name) as reader:
        synthetic.publish(writer, n)
        f = reader.next(timeout=5)
    # publish_estimates needs only these (duck typing); the workload table is the answered frame's.
    return SimpleNamespace(sequence=f.sequence, generation=f.generation, interval_start_ns=f.interval_start_ns,
                           interval_end_ns=f.interval_end_ns, workloads=[None] * workloads)


def synthetic_package_watts(n):
    return synthetic.package_watts(int(synthetic.load_at(n) * synthetic.CPU_COUNT * synthetic.NS) / 1e6)


def test_publish_estimates_writes_what_protocol_section_8_says(shm_name, out_name):
    frame = one_frame(shm_name)
    zones = ["package", dict(name="dram-0", kind="dram", socket=0)]
    with EstimatesWriter(out_name, model="mine", version="2024-06", zones=zones) as out, \
            keplershm.Reader(out_name) as answers:
        publish_estimates(out, frame, {"package": 42.5, "dram-0": 3.0}, node=50.0,
                          workloads={2: {"package": 1.5}}, processes={(1234, 987654): 0.25})
        info = answers.info
        assert (info.segment_kind, info.node_name, info.cpu_model) == (2, "mine", "2024-06")
        assert [(z.name, z.kind) for z in info.zones] == [("package", "package"), ("dram-0", "dram")]
        got = answers.next(timeout=5)
    assert (int(got.header["producer_sequence"]), int(got.header["producer_generation"])) == (frame.sequence, frame.generation)
    assert (got.interval_start_ns, got.interval_end_ns) == (frame.interval_start_ns, frame.interval_end_ns)
    rows = [(int(r["zone_index"]), int(r["workload_index"]), int(r["pid"]), int(r["start_time_ticks"]),
             float(r["power_watts"]), float(r["energy_joules"])) for r in got.estimates]
    assert rows == [(0, NO, 0, 0, 42.5, 42.5), (1, NO, 0, 0, 3.0, 3.0), (NO, NO, 0, 0, 50.0, 50.0),
                    (0, 2, 0, 0, 1.5, 1.5), (NO, NO, 1234, 987654, 0.25, 0.25)]  # 1 s interval: J = W


@pytest.mark.parametrize("kwargs, phrase", [
    (dict(zones={"gpu": 1.0}), "unknown zone 'gpu'; this estimates segment declares package"),
    (dict(zones={"package": math.nan}), "zones, zone package: nan W is not a finite number"),
    (dict(node=-1.0), "node: -1.0 W is not a finite number in [0, 1e+06]"),
    (dict(node=2e6), "is not a finite number in [0, 1e+06]"),
    (dict(node="hot"), "'hot' is not a number of watts"),
    (dict(workloads={3: 1.0}), "workload index 3 is not a workload of frame 1 (3 workloads)"),
    (dict(processes={(0, 5): 1.0}), "pid must be in 1..2^32-1"),
    (dict(processes={7: 1.0}), "is not (pid, start_time_ticks)"),
    (dict(), "nothing to publish for frame 1"),
    (dict(processes={(p, 1): 1.0 for p in range(1, 6)}), "5 rows for frame 1, more than this writer's max_rows=4"),
])
def test_publish_estimates_refuses_what_the_estimator_would_refuse(shm_name, out_name, kwargs, phrase):
    frame = one_frame(shm_name)
    with EstimatesWriter(out_name, model="mine", zones=["package"], max_rows=4) as out, keplershm.Reader(out_name) as r:
        with pytest.raises(ValueError) as error:
            publish_estimates(out, frame, **kwargs)
        assert phrase in str(error.value)
        assert r.latest() == 0  # nothing was published


def test_estimates_writer_refuses_bad_zones_and_names(out_name):
    with pytest.raises(ValueError, match="zone 'x' has kind 'watts'"):
        EstimatesWriter(out_name, model="m", zones=[dict(name="x", kind="watts")])
    with pytest.raises(ValueError, match="used twice"):
        EstimatesWriter(out_name, model="m", zones=["package", "package"])
    with pytest.raises(ValueError, match="model name must be 1 to 255 bytes"):
        EstimatesWriter(out_name, model="", zones=["package"])


def start(args, log_path):
    log = open(log_path, "w")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)


def wait_for_segment(name, proc, log_path, timeout=20):
    end = time.monotonic() + timeout
    while not os.path.exists("/dev/shm/" + name):
        assert proc.poll() is None, open(log_path).read()
        assert time.monotonic() < end, "no segment %s after %d s: %s" % (name, timeout, open(log_path).read())
        time.sleep(0.05)


def test_serve_model_answers_each_frame_with_the_models_watts(shm_name, out_name, tmp_path):
    log = str(tmp_path / "serve.log")
    with synthetic.make_writer(shm_name) as writer:
        proc = start([PYTHON, "-m", "keplershm", "serve-model", "--shm-name", shm_name, "--out", out_name,
                      "--model", "curve:idle_w=1,max_w=3"], log)
        try:
            wait_for_segment(out_name, proc, log)
            with keplershm.Reader(out_name) as answers, keplershm.Reader(shm_name) as frames:
                assert (answers.info.node_name, answers.info.cpu_model) == ("curve", "curve idle_w=1 max_w=3")
                for n in range(1, 8):
                    synthetic.publish(writer, n)
                    frame = frames.next(timeout=5)
                    got = answers.next(timeout=10)
                    assert int(got.header["producer_sequence"]) == frame.sequence
                    assert int(got.header["producer_generation"]) == frame.generation
                    want = CurveModel(idle_w=1, max_w=3).predict(frame_table(frame))["package"][0]
                    assert [(int(r["zone_index"]), float(r["energy_joules"])) for r in got.estimates] == \
                        [(0, pytest.approx(want, rel=1e-12))]
        finally:
            proc.terminate()
            assert proc.wait(timeout=10) == 0, open(log).read()
    assert not os.path.exists("/dev/shm/" + out_name), "SIGTERM retires the estimates segment and removes its name"
    assert "answers '%s' in estimates segment '%s'" % (shm_name, out_name) in open(log).read()


def test_the_example_linear_model_fits_a_recording_and_answers_live_frames(recording, shm_name, out_name, tmp_path):
    coefficients, log = str(tmp_path / "linear.json"), str(tmp_path / "linear.log")
    example = os.path.join(ROOT, "bindings", "python", "examples", "linear_model.py")
    with synthetic.make_writer(shm_name) as writer:
        proc = start([PYTHON, example, "--fit", recording, "--save", coefficients, "--shm-name", shm_name,
                      "--out", out_name, "--frames", "5"], log)
        try:
            wait_for_segment(out_name, proc, log)
            model = json.load(open(coefficients))
            assert set(model) == {"package", "dram"} and "cpu_time_ms_per_s" in model["package"][1]
            with keplershm.Reader(out_name) as answers, keplershm.Reader(shm_name) as frames:
                for n in range(100, 105):  # inside the recorded range (a fit does not extrapolate)
                    synthetic.publish(writer, n)
                    features = node_features(frames.next(timeout=5))
                    got = {int(r["zone_index"]): float(r["power_watts"]) for r in answers.next(timeout=10).estimates}
                    for index, zone in enumerate(["package", "dram"]):
                        intercept, terms = model[zone]
                        want = intercept + sum(c * features[name] for name, c in terms.items())
                        assert got[index] == pytest.approx(max(0.0, want), rel=1e-9)
                    # A linear fit of a quadratic law: close, not exact.
                    assert got[0] == pytest.approx(synthetic_package_watts(n), rel=0.05)
            assert proc.wait(timeout=20) == 0, open(log).read()  # --frames 5: done
        finally:
            proc.kill()
    assert "package W = " in open(log).read()
