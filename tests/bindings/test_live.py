"""Live reading while another process publishes: copies, validated zero-copy views, overwrite detection."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import keplershm
import synthetic
from keplershm.errors import FrameOverwritten, NotYet, Timeout, WriterGone

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)


def start_publisher(name, frames, interval_ms, slots=4, crash=False):
    args = [PYTHON, os.path.join(HERE, "publisher.py"), name, str(frames), str(interval_ms), str(slots)]
    proc = subprocess.Popen(args + (["crash"] if crash else []), stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def assert_whole(frame):
    """Every record of a synthetic frame encodes the frame's interval: a torn read would break this."""
    n = frame.interval_start_ns // synthetic.NS
    assert frame.interval_end_ns == (n + 1) * synthetic.NS
    assert (frame.processes["pid"] == n).all() and (frame.processes["start_time_ticks"] == n).all()
    assert (frame.processes["page_cache_hits"] == n * 10).all()
    assert len(frame.processes) == 64


def test_copies_and_validated_views_while_a_process_publishes(shm_name):
    proc = start_publisher(shm_name, frames=300, interval_ms=2, slots=4)
    try:
        reader = keplershm.Reader(shm_name, writer_grace_s=0.5)
        seen, views_ok, views_lapped = [], 0, 0
        for frame in reader.frames(timeout=10):
            assert_whole(frame)
            seen.append((frame.sequence, frame.missed))
            latest = reader.latest()
            try:
                with reader.view(latest) as view:
                    assert view.processes.flags.writeable is False
                    pids = np.array(view.processes["pid"])  # copy made inside the block
                    start = view.interval_start_ns
                views_ok += 1
                assert (pids == start // synthetic.NS).all()
            except FrameOverwritten:
                views_lapped += 1  # legitimate under load: the numbers read were discarded
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert len(seen) > 10 and views_ok > 0
    sequences = [s for s, _ in seen]
    assert sequences == sorted(sequences)
    # Frames are either delivered or counted as missed: nothing vanishes silently.
    assert sequences[-1] - sequences[0] + 1 == len(seen) + sum(m for _, m in seen[1:])


def test_a_view_held_past_its_overwrite_raises(shm_name):
    with synthetic.make_writer(shm_name, slot_count=4) as writer, keplershm.Reader(shm_name) as reader:
        synthetic.publish(writer, 1)
        with pytest.raises(FrameOverwritten, match="overwritten by the writer while the zero-copy view was held"):
            with reader.view(1) as view:
                assert view.processes["pid"][0] == 1
                for n in range(2, 7):  # four slots: frame 5 reuses frame 1's slot
                    synthetic.publish(writer, n)
        with pytest.raises(RuntimeError, match="used after its `with` block"):
            view.processes
        synthetic.publish(writer, 7)
        with reader.view() as fresh:  # the newest frame is fine
            assert fresh.sequence == 7


def test_a_view_from_another_process_overwritten_raises(shm_name):
    proc = start_publisher(shm_name, frames=2000, interval_ms=5, slots=3)
    try:
        reader = keplershm.Reader(shm_name)
        reader.wait(0, timeout=10)
        with pytest.raises(FrameOverwritten):
            held = reader.latest()
            with reader.view(held):
                deadline = time.monotonic() + 20
                while reader.latest() < held + 3 and time.monotonic() < deadline:  # 3 slots: reused by now
                    time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait()


def test_not_yet_lapped_and_timeout_are_distinct_errors(shm_name):
    with synthetic.make_writer(shm_name, slot_count=4) as writer, keplershm.Reader(shm_name) as reader:
        with pytest.raises(NotYet, match="not published yet"):
            reader.copy(1)
        with pytest.raises(Timeout):
            reader.next(timeout=0.25)
        for n in range(1, 11):
            synthetic.publish(writer, n)
        with pytest.raises(FrameOverwritten, match="overwritten"):
            reader.copy(2)
        assert reader.copy(10).sequence == 10
        assert reader.latest_frame().sequence == 10


def test_waiting_is_interruptible_in_short_slices(shm_name, monkeypatch):
    """Each call into the C library waits at most 100 ms, so Python can act on Ctrl-C between calls."""
    slices = []
    real = keplershm._lib.lib

    class SpyLibrary:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def keplershm_reader_next(handle, ms, view):
            slices.append(ms)
            return real.keplershm_reader_next(handle, ms, view)

    with synthetic.make_writer(shm_name), keplershm.Reader(shm_name) as reader:
        monkeypatch.setattr(keplershm.reader, "lib", SpyLibrary())
        with pytest.raises(Timeout):
            reader.next(timeout=0.5)
    assert len(slices) >= 4 and max(slices) <= 100


def test_retired_writer_ends_iteration_and_crashed_writer_raises(shm_name):
    proc = start_publisher(shm_name, frames=5, interval_ms=1)
    reader = keplershm.Reader(shm_name, writer_grace_s=0.2)
    frames = list(reader.frames(timeout=10))
    assert proc.wait(timeout=10) == 0 and len(frames) >= 1

    crashed = shm_name + "-crash"
    proc = start_publisher(crashed, frames=3, interval_ms=1, crash=True)
    try:
        reader = keplershm.Reader(crashed, writer_grace_s=0.2, heartbeat_timeout_ms=300)
        with pytest.raises(WriterGone, match="heartbeat stale"):
            for _ in reader.frames(timeout=10):
                pass
    finally:
        proc.wait(timeout=10)
        if os.path.exists("/dev/shm/" + crashed):
            os.unlink("/dev/shm/" + crashed)


def test_sections_can_be_chosen(shm_name):
    with synthetic.make_writer(shm_name) as writer:
        reader = keplershm.Reader(shm_name, sections=["zones"])
        synthetic.publish(writer, 1)
        frame = reader.next(timeout=2)
        assert frame.processes is None and len(frame.zones) == 3
        assert [z.kind for z in frame.segment.zones] == ["package", "dram", "package"]
    with pytest.raises(ValueError, match="unknown section"):
        keplershm.Reader(shm_name, sections=["procs"])
