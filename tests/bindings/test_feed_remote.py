"""keplershm.remote against the real kepler-feed fed by the real kepler-collect: frames equal the local
Reader's for the same sequences (same dtypes, same values), selection narrows them, refusals carry the
gRPC status, and `record --remote` writes a recording that Reader reads back with the same records.

Needs KEPLER_COLLECT and KEPLER_FEED (set by CTest) and the generated stubs ($KEPLERSHM_FEED_STUBS);
skips with the reason otherwise.
"""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import keplershm
from keplershm.reader import Reader

COLLECT, FEED = os.environ.get("KEPLER_COLLECT"), os.environ.get("KEPLER_FEED")
PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)
DEADLINE = 90  # seconds; only bounds a test that already fails

# The token checks below need neither program: only the tests that talk to a feed skip without them.
needs_node = pytest.mark.skipif(not (COLLECT and FEED), reason="needs kepler-collect and kepler-feed (KEPLER_COLLECT, "
                                                               "KEPLER_FEED)")
remote = pytest.importorskip("keplershm.remote")
try:
    remote.stubs()
except ImportError as e:
    pytest.skip(str(e), allow_module_level=True)


def wait_for(predicate, what):
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def stop(processes):
    for p in processes:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


def start_feed(shm_name, tmp_path, extra=()):
    """kepler-feed on a port of the kernel's choosing: (process, "127.0.0.1:port")."""
    port_file = tmp_path / ("port-" + shm_name)
    feed = subprocess.Popen([FEED, "--shm-name", shm_name, "--listen", "127.0.0.1:0", "--port-file", str(port_file),
                             *extra],
                            stdout=open(tmp_path / ("feed-%s.log" % shm_name), "w"), stderr=subprocess.STDOUT)
    wait_for(lambda: port_file.exists() or feed.poll() is not None, "kepler-feed's port")
    assert port_file.exists(), (tmp_path / ("feed-%s.log" % shm_name)).read_text()
    return feed, "127.0.0.1:" + port_file.read_text().strip()


@pytest.fixture
def node(tmp_path, shm_name):
    """The real collector (procfs, no power meter) and kepler-feed on a port of the kernel's choosing."""
    (tmp_path / "sysfs").mkdir()
    collector = subprocess.Popen([COLLECT, "--shm-name", shm_name, "--source", "procfs", "--kube", "off", "--interval",
                                  "100ms", "--slots", "64", "--process-capacity", "2048", "--workload-capacity", "256",
                                  "--sysfs-root", str(tmp_path / "sysfs")],
                                 stdout=open(tmp_path / "collect.log", "w"), stderr=subprocess.STDOUT)
    children = [collector]
    try:
        feed, target = start_feed(shm_name, tmp_path)
        children.append(feed)
        wait_for(lambda: remote.Subscriber(target).describe().stats.frames_read > 0, "frames at the feed")
        yield target
    finally:
        stop(children)


def same_records(a, b):
    assert a.dtype == b.dtype
    assert len(a) == len(b)
    assert a.tobytes() == b.tobytes() or all(np.array_equal(a[n], b[n]) for n in a.dtype.names)


@needs_node
def test_frames_equal_the_local_readers(node, shm_name):
    local = Reader.live(shm_name)
    with remote.Subscriber(node, timeout=DEADLINE) as sub:
        for i, frame in zip(range(5), sub):
            mine = local.copy(frame.sequence)
            assert frame.generation == mine.generation
            assert frame.segment.node_name == mine.segment.node_name
            assert frame.segment.zones == mine.segment.zones
            assert frame.segment.cpu_count == mine.segment.cpu_count
            for name in ("interval_start_ns", "interval_end_ns", "interval_end_realtime_ns", "metric_mask", "flags",
                         "source", "power_source", "process_read_time_ns"):
                assert frame.header[name] == mine.header[name], name
            for name in ("processes", "workloads", "zones", "cpus", "estimates"):
                if getattr(mine, name) is None:
                    assert getattr(frame, name) is None, name
                else:
                    same_records(getattr(frame, name), getattr(mine, name))
            assert frame.strings == mine.strings
            assert frame.unaccounted.tobytes() == mine.unaccounted.tobytes()


@needs_node
def test_selection_and_refusals(node):
    with remote.Subscriber(node, sections={"processes": ["pid", "cpu_time_ns"]}, top_n=2, timeout=DEADLINE) as sub:
        frame = next(iter(sub))
        assert frame.processes.dtype.names == ("pid", "cpu_time_ns")
        assert len(frame.processes) <= 2
        assert frame.zones is None and frame.workloads is None
    with pytest.raises(remote.FeedError) as refused:
        next(iter(remote.Subscriber(node, sections=["gpus"], timeout=DEADLINE)))
    assert refused.value.status == "INVALID_ARGUMENT"
    assert "unknown section 'gpus'" in str(refused.value)


@needs_node
def test_record_remote_reads_back_like_a_local_recording(node, shm_name, tmp_path):
    out = tmp_path / "remote.kshm"
    result = subprocess.run([PYTHON, "-m", "keplershm", "record", "--remote", node, "--out", str(out),
                             "--duration", "2s"], capture_output=True, text=True, timeout=DEADLINE)
    assert result.returncode == 0, result.stderr
    local = Reader.live(shm_name)
    frames = list(Reader.open_recording(str(out)).frames())
    assert len(frames) >= 3, result.stderr
    # The relay renumbers frames; the intervals identify them: each recorded frame equals the live one.
    by_interval = {}
    for n in range(max(1, local.latest() - 60), local.latest() + 1):
        try:
            f = local.copy(n)
        except keplershm.KeplershmError:
            continue
        by_interval[int(f.header["interval_end_ns"])] = f
    matched = 0
    for frame in frames:
        mine = by_interval.get(int(frame.header["interval_end_ns"]))
        if mine is None:
            continue  # lapped in the local ring meanwhile (a loaded machine)
        matched += 1
        same_records(frame.processes, mine.processes)
        same_records(frame.cpus, mine.cpus)
        assert frame.unaccounted.tobytes() == mine.unaccounted.tobytes()
        assert frame.segment.node_name == mine.segment.node_name
    assert matched >= 1


@needs_node
def test_feed_serves_an_estimates_segment(tmp_path, shm_name):
    """An external model's answers (PROTOCOL.md §8) reach off-node consumers through a feed of their own
    segment, with the (generation, sequence) of the collector frame each one answers."""
    import types
    from keplershm.estimates import EstimatesWriter
    with EstimatesWriter(shm_name, model="ab-model", zones=("package",)) as writer:
        answered = types.SimpleNamespace(sequence=7, generation=0x1234, interval_start_ns=10**9, interval_end_ns=2 * 10**9)
        writer.publish(answered, zones={"package": 12.5})
        feed, target = start_feed(shm_name, tmp_path)
        try:
            with remote.Subscriber(target, sections=["estimates"], timeout=DEADLINE) as sub:
                frame = next(iter(sub))
        finally:
            stop([feed])
    assert (int(frame.header["producer_generation"]), int(frame.header["producer_sequence"])) == (0x1234, 7)
    assert frame.segment.node_name == "ab-model"
    assert frame.estimates["power_watts"].tolist() == [12.5]
    assert frame.estimates["energy_joules"].tolist() == [12.5]


@pytest.mark.skipif(not os.environ.get("KEPLER_ESTIMATE"), reason="needs kepler-estimate (KEPLER_ESTIMATE)")
@needs_node
def test_feed_joins_kepler_estimates_own_answers(tmp_path, shm_name):
    """kepler-estimate --publish-estimates and kepler-feed --estimates: frame.model_estimates holds the answer
    to that very frame, equal to the local estimates segment's (same dtype, same rows)."""
    (tmp_path / "sysfs").mkdir()
    prefix = shm_name + "-est"
    segment = prefix + "-curve"
    children = [subprocess.Popen([COLLECT, "--shm-name", shm_name, "--source", "procfs", "--kube", "off", "--interval",
                                  "200ms", "--slots", "64", "--sysfs-root", str(tmp_path / "sysfs")],
                                 stdout=open(tmp_path / "collect.log", "w"), stderr=subprocess.STDOUT),
                subprocess.Popen([os.environ["KEPLER_ESTIMATE"], "--shm-name", shm_name, "--listen", "none",
                                  "--publish-estimates", prefix],
                                 stdout=open(tmp_path / "estimate.log", "w"), stderr=subprocess.STDOUT)]
    try:
        feed, target = start_feed(shm_name, tmp_path, ["--estimates", segment])
        children.append(feed)
        answered = 0
        with remote.Subscriber(target, sections=["zones", "estimates"], timeout=DEADLINE) as sub:
            for frame in sub:
                answer = frame.model_estimates[segment]
                if answer.missing:
                    assert answer.rows is None and answer.reason
                    continue
                mine = Reader.live(segment).copy(answer.sequence)
                assert (int(mine.header["producer_generation"]), int(mine.header["producer_sequence"])) == \
                    (frame.generation, frame.sequence)
                assert answer.model == "curve" and [z.kind for z in answer.zones] == ["package"]
                same_records(answer.rows, mine.estimates)
                answered += 1
                if answered == 3:
                    break
        with remote.Subscriber(target, sections=["zones"], timeout=DEADLINE) as sub:
            assert next(iter(sub)).model_estimates == {}
    finally:
        stop(children)


PLAINTEXT_REFUSED = ("node-1.example:9106", "10.0.0.5:9106", "[2001:db8::1]:9106", "dns:///node-1:9106",
                     "ipv4:127.0.0.1:9106,10.0.0.5:9106", "localhost.attacker.example:9106")
LOOPBACK = ("localhost:9106", "127.0.0.2:9106", "[::1]:9106", "::1", "ipv4:127.0.0.1:9106", "dns:///localhost:9106",
            "unix:/run/keplershm/feed.sock")


@pytest.mark.parametrize("target", PLAINTEXT_REFUSED)
def test_a_token_is_not_sent_in_plain_text_beyond_loopback(target):
    with pytest.raises(keplershm.errors.InvalidArgument) as refused:
        remote.Subscriber(target, token="secret")
    message = str(refused.value)
    assert target in message and "tls=" in message and "allow_plaintext_token=True" in message
    assert "secret" not in message
    assert isinstance(refused.value, ValueError)


@pytest.mark.parametrize("target", LOOPBACK)
def test_a_token_may_go_in_plain_text_to_loopback(target):
    remote.Subscriber(target, token="secret").close()  # the channel connects lazily: nothing listens here


def test_a_token_goes_in_plain_text_when_the_caller_says_so_or_over_tls():
    remote.Subscriber("node-1.example:9106", token="secret", allow_plaintext_token=True).close()
    remote.Subscriber("node-1.example:9106", token="secret", tls=True).close()
    remote.Subscriber("node-1.example:9106").close()  # no token: nothing to protect


def test_record_refuses_a_plaintext_token_before_creating_the_file(tmp_path):
    token, out = tmp_path / "token", tmp_path / "remote.kshm"
    token.write_text("secret\n")
    result = subprocess.run([PYTHON, "-m", "keplershm", "record", "--remote", "node-1.example:9106", "--token-file",
                             str(token), "--out", str(out), "--duration", "1s"],
                            capture_output=True, text=True, timeout=DEADLINE)
    assert result.returncode == 2, result.stderr
    assert "over plain text" in result.stderr and "--tls-ca" in result.stderr
    assert "--allow-plaintext-token" in result.stderr
    assert not out.exists()
