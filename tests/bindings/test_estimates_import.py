"""kepler-estimate imports a Python model through the estimates channel (`--model NAME=external:SEGMENT`).

Real processes: a synthetic collector (publisher.py: frames with RAPL zones every 100 ms, each with a
1 s interval), a Python model (`python3 -m keplershm serve-model`, or estimates_producer.py when it must
misbehave), and the kepler-estimate binary, read through /metrics. Skips without the built estimator.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

import synthetic
from keplershm.model import CURVE_IDLE_W, CURVE_MAX_W

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def estimator_binary():
    path = os.environ.get("KEPLER_ESTIMATE") or os.path.join(ROOT, "build", "bin", "kepler-estimate")
    if not os.access(path, os.X_OK):
        pytest.skip("kepler-estimate is not built (looked for %s)" % path)
    return path


class Processes:
    """Children of one test, logs in tmp_path; all killed at the end."""

    def __init__(self, tmp_path):
        self.tmp_path, self.children = tmp_path, []

    def start(self, name, args):
        log = str(self.tmp_path / (name + ".log"))
        proc = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        proc.log = log
        self.children.append(proc)
        return proc

    def stop_all(self):
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def procs(tmp_path):
    p = Processes(tmp_path)
    yield p
    p.stop_all()


@pytest.fixture
def names(shm_name):
    out = {"collector": shm_name, "model": shm_name + "-est", "junk": shm_name + "-junk"}
    yield out
    for name in out.values():
        try:
            os.unlink("/dev/shm/" + name)
        except FileNotFoundError:
            pass


def log_of(proc):
    return open(proc.log).read()


def start_collector(procs, names):
    return procs.start("collector", [PYTHON, os.path.join(HERE, "publisher.py"), names["collector"], "100000", "100", "8"])


def start_estimator(procs, names, *models, primary=None):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [estimator_binary(), "--shm-name", names["collector"], "--listen", "127.0.0.1:%d" % port]
    for m in models:
        args += ["--model", m]
    if primary:
        args += ["--primary", primary]
    proc = procs.start("estimator", args)
    proc.port = port
    return proc


def scrape(estimator):
    """[(name, {labels}, value)] from /metrics."""
    assert estimator.poll() is None, "kepler-estimate exited: %s" % log_of(estimator)
    try:
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % estimator.port, timeout=5).read().decode()
    except OSError:
        return []  # not listening yet
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def value(samples, name, **labels):
    """Sum over the series of `name` whose labels include `labels` (None if there is none)."""
    hits = [v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items())]
    return sum(hits) if hits else None


def wait_for(estimator, condition, timeout=30, what="condition"):
    end = time.monotonic() + timeout
    while True:
        samples = scrape(estimator)
        if samples and condition(samples):
            return samples
        assert time.monotonic() < end, "%s not met in %d s; estimator log:\n%s" % (what, timeout, log_of(estimator))
        time.sleep(0.2)


def expected_error(n):
    """|curve - meter| in watts for synthetic frame n (the curve as serve-model computes it, MODELS.md)."""
    busy_ns = int(synthetic.load_at(n) * synthetic.CPU_COUNT * synthetic.NS)
    node_busy_ms = synthetic.CPU_COUNT * (busy_ns // synthetic.CPU_COUNT) / 1e6  # the CPUS section, 1 s interval
    u = min(1.0, node_busy_ms / 1000 / synthetic.CPU_COUNT)
    curve = synthetic.CPU_COUNT * (CURVE_IDLE_W + (CURVE_MAX_W - CURVE_IDLE_W) * u)
    watts = synthetic.package_watts(busy_ns / 1e6)
    meter = (int(watts * 0.6e6) + int(watts * 0.4e6)) / 1e6  # two package zones, integer microjoules
    return abs(curve - meter)


def serve_model(procs, names, *extra):
    return procs.start("model", [PYTHON, "-m", "keplershm", "serve-model", "--shm-name", names["collector"],
                                 "--out", names["model"], "--model", "curve"] + list(extra))


def test_a_python_model_is_imported_as_primary_with_its_error_against_the_meter(procs, names):
    start_collector(procs, names)
    serve_model(procs, names)
    est = start_estimator(procs, names, "py=external:" + names["model"], primary="py")
    s = wait_for(est, lambda s: (value(s, "kepler_model_answers_total", model="py", timing="ready") or 0) >= 10,
                 what="10 answers used by the estimator")
    assert value(s, "kepler_model_external_info", model="py", producer="curve", segment=names["model"],
                 version="curve idle_w=0.74 max_w=3.5") == 1
    # Primary: the Kepler names carry the Python model's energy (a whole-node prediction: package "all").
    assert value(s, "kepler_node_package_joules_total", source="py", package="all", mode="dynamic") > 0
    assert value(s, "kepler_model_info", model="py", selected="true") == 1
    # Its error against the meter is the one of some frame the collector published.
    error = value(s, "kepler_model_absolute_error_watts", model="py", zone="package")
    assert min(abs(error - expected_error(n)) for n in range(1, 2000)) < 1e-5, error
    assert value(s, "kepler_model_mape_ratio", model="py", zone="package") > 0
    assert value(s, "kepler_model_rejected_answers_total", model="py") == 0
    assert "model py: reading estimates segment %s (model \"curve\"" % names["model"] in log_of(est)


def frames_and_measured(samples):
    return (value(samples, "kepler_estimator_frames_read_total"),
            value(samples, "kepler_model_node_joules_total", model="measured", zone="package"))


def test_a_killed_python_model_does_not_stall_the_estimator(procs, names):
    start_collector(procs, names)
    model = serve_model(procs, names)
    est = start_estimator(procs, names, "py=external:" + names["model"], primary="py")
    wait_for(est, lambda s: (value(s, "kepler_model_answers_total", model="py", timing="ready") or 0) >= 5,
             what="5 answers used")
    model.send_signal(signal.SIGKILL)
    model.wait(timeout=10)
    before = wait_for(est, lambda s: True)
    frames0, joules0 = frames_and_measured(before)
    missing0 = value(before, "kepler_model_missing_answers_total", model="py")
    time.sleep(3)
    after = scrape(est)
    frames1, joules1 = frames_and_measured(after)
    # The collector publishes 10 frames/s: the estimator keeps reading them and the meter takes over.
    assert frames1 - frames0 >= 15, (frames0, frames1)
    assert joules1 > joules0
    assert value(after, "kepler_node_package_joules_total", source="rapl") > \
        (value(before, "kepler_node_package_joules_total", source="rapl") or 0)
    assert value(after, "kepler_model_missing_answers_total", model="py") >= missing0 + 5  # past the 16-frame window
    assert value(after, "kepler_model_info", model="measured", selected="true") == 1
    # Once the dead producer's heartbeat is stale (4 s) the estimator says so.
    wait_for(est, lambda s: any(n == "kepler_model_info" and l.get("model") == "py" and "is gone" in l.get("reason", "")
                                for n, l, _ in s), what="the reason naming the dead producer")


def test_a_slow_python_model_is_counted_late_and_does_not_stall_the_estimator(procs, names):
    start_collector(procs, names)
    procs.start("slow", [PYTHON, os.path.join(HERE, "estimates_producer.py"), "slow", names["collector"], names["model"], "1.3"])
    est = start_estimator(procs, names, "slow=external:" + names["model"], primary="slow")
    before = wait_for(est, lambda s: (value(s, "kepler_model_answers_total", model="slow", timing="late") or 0) >= 5,
                      what="5 late answers")
    frames0, joules0 = frames_and_measured(before)
    time.sleep(2)
    after = scrape(est)
    frames1, joules1 = frames_and_measured(after)
    assert frames1 - frames0 >= 10, (frames0, frames1)  # 10 frames/s published; a wait per frame would show
    assert joules1 > joules0
    assert value(after, "kepler_model_answer_lag_seconds", model="slow") >= 1.0  # one interval (1 s) is the deadline
    assert value(after, "kepler_model_answers_total", model="slow", timing="ready") == 0
    # Late answers are still compared with the meter of the frame they answer.
    assert value(after, "kepler_model_absolute_error_watts", model="slow", zone="package") is not None
    assert value(after, "kepler_model_info", model="measured", selected="true") == 1


def test_hostile_estimates_are_refused_with_reasons_and_the_estimator_keeps_going(procs, names):
    start_collector(procs, names)
    with open("/dev/shm/" + names["junk"], "wb") as f:
        f.write(os.urandom(1 << 16))
    procs.start("hostile", [PYTHON, os.path.join(HERE, "estimates_producer.py"), "hostile", names["collector"], names["model"]])
    est = start_estimator(procs, names, "evil=external:" + names["model"], "junk=external:" + names["junk"],
                          "wrong=external:" + names["collector"], primary="evil")
    s = wait_for(est, lambda s: (value(s, "kepler_model_rejected_answers_total", model="evil") or 0) >= 16,
                 what="16 rejected answers")
    frames0 = value(s, "kepler_estimator_frames_read_total")
    time.sleep(1.5)
    s = scrape(est)
    assert value(s, "kepler_estimator_frames_read_total") - frames0 >= 8
    # Of each rotation of seven broken answers only the first copy of the duplicated one is valid.
    accepted, rejected = value(s, "kepler_model_answers_total", model="evil") or 0, value(s, "kepler_model_rejected_answers_total", model="evil")
    assert accepted <= rejected / 6 + 1, (accepted, rejected)
    assert value(s, "kepler_model_info", model="measured", selected="true") == 1
    log = log_of(est)
    for phrase in ["energy_joules nan", "zone_index 5 but the estimates segment declares 1 zone(s)",
                   "answers no collector frame", "answer for a frame this estimator never read",
                   "no longer remembers", "second answer for a frame: ignored", "65537 rows, more than the 65536 accepted",
                   "model junk: waiting for estimates segment %s (" % names["junk"],
                   "model wrong: segment %s is of kind 1 (collector frames), not an estimates segment" % names["collector"]]:
        assert phrase in log, "log lacks %r:\n%s" % (phrase, log)
    reasons = {l["model"]: l["reason"] for n, l, _ in s if n == "kepler_model_info"}
    assert reasons["junk"].startswith("waiting for estimates segment")
    assert "not an estimates segment" in reasons["wrong"]
