"""Recordings made through the C recorder read back exactly what was published."""
import os
import subprocess
import sys
import threading
import time

import pytest

import keplershm
import synthetic

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)


def test_recording_round_trip(recording):
    with keplershm.Reader(recording) as reader:
        info = reader.info
        assert info.is_recording and info.latest_sequence == 240 and info.cpu_count == synthetic.CPU_COUNT
        assert info.cpu_model == "Synthetic CPU @ 1.00GHz"
        frames = list(reader)
    assert [f.sequence for f in frames] == list(range(1, 241))
    for f in frames:
        n = f.interval_start_ns // synthetic.NS
        assert f.sequence == n and f.dt == 1.0
        assert (f.processes["pid"] == n).all()
        assert list(f.processes["comm"]) == [b"proc%d" % i for i in range(5)]
        busy = int(synthetic.load_at(n) * synthetic.CPU_COUNT * synthetic.NS)
        assert int(f.processes["cpu_time_ns"].sum()) + int(f.unaccounted["cpu_time_ns"]) == busy
        assert len(f.cpus) == synthetic.CPU_COUNT and len(f.zones) == 3
    # Random access by position, and zero-copy views over the file mapping (never overwritten).
    with keplershm.Reader(recording) as reader:
        assert reader.copy(17).sequence == 17
        with reader.view(18) as view:
            assert view.sequence == 18 and not view.processes.flags.writeable


def test_record_command_through_the_c_recorder(shm_name, tmp_path):
    out = str(tmp_path / "cli.kshm")
    writer = synthetic.make_writer(shm_name, heartbeat_period_s=0.1)
    stop = threading.Event()

    def publish():
        n = 0
        while not stop.is_set():
            n += 1
            synthetic.publish(writer, n)
            writer.heartbeat()
            time.sleep(0.01)

    thread = threading.Thread(target=publish)
    thread.start()
    try:
        result = subprocess.run([PYTHON, "-m", "keplershm", "record", "--shm-name", shm_name, "--out", out,
                                 "--duration", "1s"], capture_output=True, text=True, timeout=60)
    finally:
        stop.set()
        thread.join()
        writer.close()
    assert result.returncode == 0, result.stderr
    assert "stopped because duration reached" in result.stderr
    frames = list(keplershm.Reader(out))
    assert len(frames) >= 10
    seq = [f.sequence for f in frames]
    assert seq == sorted(seq)


def test_record_stops_cleanly_at_the_size_cap(shm_name, tmp_path):
    out = str(tmp_path / "capped.kshm")
    with synthetic.make_writer(shm_name) as writer:
        done = []
        thread = threading.Thread(target=lambda: done.append(keplershm.record(shm_name, out, duration_s=10,
                                                                              max_bytes=40_000)))
        thread.start()
        n = 0
        while thread.is_alive() and n < 2000:
            n += 1
            synthetic.publish(writer, n)
            time.sleep(0.002)
        thread.join()
    result = done[0]
    assert result.stopped_because.startswith("size cap") and 0 < result.bytes <= 40_000
    assert len(list(keplershm.Reader(out))) == result.frames


@pytest.fixture
def small_disk(tmp_path):
    """A directory on a 256 KiB tmpfs: a filesystem that fills after a few dozen frames."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    where = tmp_path / "small"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        # Lazily: a reader left open by a failing assertion still maps a file there.
        subprocess.run(["umount", "--lazy", str(where)], check=True)


def test_a_full_disk_ends_the_recorder_with_disk_full_and_whole_frames(shm_name, small_disk):
    out = str(small_disk / "full.kshm")
    appended = 0
    with synthetic.make_writer(shm_name, slot_count=4) as writer, keplershm.Reader(shm_name, writer_grace_s=0) as reader:
        recorder = keplershm.Recorder(out)
        with pytest.raises(keplershm.errors.DiskFull) as full:
            for n in range(1, 100_000):
                synthetic.publish(writer, n)
                assert recorder.append_next(reader, 1000) == (0, 0)
                appended += 1
        assert isinstance(full.value, keplershm.errors.NoSpace)
        assert str(full.value).startswith("disk full") and out in str(full.value)
        synthetic.publish(writer, n + 1)
        with pytest.raises(keplershm.KeplershmError):
            recorder.append_next(reader, 1000)  # refused: the file ends at the last whole frame
        recorder.close()
    assert appended > 0
    with keplershm.Reader(out) as recorded:
        frames = list(recorded)  # no RecordingTruncated: the partial record was cut off
    assert [f.sequence for f in frames] == list(range(1, appended + 1))
    assert all((f.processes["pid"] == f.sequence).all() for f in frames)


def test_record_command_says_disk_full_and_leaves_a_readable_file(shm_name, small_disk):
    out = str(small_disk / "cli.kshm")
    with synthetic.make_writer(shm_name, heartbeat_period_s=0.1) as writer:
        recorder = subprocess.Popen([PYTHON, "-m", "keplershm", "record", "--shm-name", shm_name, "--out", out,
                                     "--duration", "60s"], stderr=subprocess.PIPE, text=True)
        n = 0
        while recorder.poll() is None and n < 20_000:
            n += 1
            synthetic.publish(writer, n)
            writer.heartbeat()
            time.sleep(0.002)
        _, stderr = recorder.communicate(timeout=60)
    assert recorder.returncode == 1, stderr
    assert "stopped because disk full" in stderr and out in stderr
    recorded = int(stderr.split("\n")[-2].split(" frames")[0])
    with keplershm.Reader(out) as reader:
        frames = list(reader)
    assert len(frames) == recorded > 0
    seq = [f.sequence for f in frames]
    assert seq == sorted(seq)


def test_record_ends_when_the_writer_retires(shm_name, tmp_path):
    out = str(tmp_path / "retired.kshm")
    proc = subprocess.Popen([PYTHON, os.path.join(HERE, "publisher.py"), shm_name, "30", "10"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    result = keplershm.record(shm_name, out, writer_grace_s=0.3)
    proc.wait(timeout=10)
    assert result.stopped_because == "writer retired" and result.frames >= 1


def test_truncated_recording_reads_whole_frames_then_says_so(recording, tmp_path):
    cut = str(tmp_path / "cut.kshm")
    data = open(recording, "rb").read()
    open(cut, "wb").write(data[:len(data) - 1000])
    reader = keplershm.Reader(cut)
    got = []
    with pytest.raises(keplershm.RecordingTruncated, match="ends in the middle of a record"):
        for f in reader:
            got.append(f.sequence)
    assert got == list(range(1, len(got) + 1)) and len(got) >= 200
    assert len(list(keplershm.Reader(cut).frames(allow_truncated=True))) == len(got)


def test_frames_without_numpy_are_plain_dicts(recording):
    code = ("import sys; sys.modules['numpy'] = None\n"
            "import keplershm\n"
            "f = next(iter(keplershm.Reader(%r)))\n"
            "assert isinstance(f.processes, list) and f.processes[0]['pid'] == 1, f.processes[0]\n"
            "assert f.processes[0]['comm'] == 'proc0' and len(f.processes[0]['softirq']) == 10\n"
            "assert f.unaccounted['cpu_time_ns'] >= 0 and f.header['sequence'] == 1\n"
            "print('plain ok')\n" % recording)
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "plain ok" in result.stdout, result.stderr


def test_pandas_helper_or_a_clear_message(recording):
    frame = next(iter(keplershm.Reader(recording)))
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="python3-pandas"):
            frame.to_pandas("processes")
        return
    df = frame.to_pandas("processes")
    assert list(df["comm"]) == ["proc%d" % i for i in range(5)] and "softirq_9" in df.columns
