"""Untrusted input (recordings, CSVs, model directories, estimates) gives one clear line, never a traceback."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import keplershm
from keplershm.errors import BadMagic, CorruptData, NotFound

PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)


def run(*args):
    return subprocess.run([PYTHON, "-m", "keplershm", *args], capture_output=True, text=True, timeout=120)


def assert_clear(result, *phrases):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, result.stderr


def test_reader_errors_name_the_problem(tmp_path):
    with pytest.raises(NotFound, match="cannot open segment 'no-such-segment-kpy'"):
        keplershm.Reader(shm_name="no-such-segment-kpy")
    junk = tmp_path / "junk.kshm"
    junk.write_bytes(b"\x7fELF" + bytes(200))
    with pytest.raises(BadMagic, match="not a keplershm recording"):
        keplershm.Reader(recording=str(junk))


def test_flipped_bytes_in_a_recording_are_reported(recording, tmp_path):
    bad = tmp_path / "flipped.kshm"
    data = bytearray(open(recording, "rb").read())
    data[len(data) // 2] ^= 0xFF  # inside some frame's payload: its checksum no longer matches
    bad.write_bytes(bytes(data))
    with pytest.raises(CorruptData, match="checksum"):
        for _ in keplershm.Reader(str(bad)):
            pass
    result = run("train", str(bad), "--out", str(tmp_path / "m"))
    assert_clear(result, "cannot read the recording", "checksum")


def test_train_and_analyze_reject_files_they_cannot_use(tmp_path):
    assert_clear(run("train", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "m")), "no such file")
    binary = tmp_path / "random.bin"
    binary.write_bytes(os.urandom(4096).replace(b"KEPLREC1", b"xxxxxxxx") + b"\0")
    assert_clear(run("train", str(binary), "--out", str(tmp_path / "m")), "neither a keplershm recording")
    text = tmp_path / "notes.csv"
    text.write_text("a,b\n1,2\n")
    assert_clear(run("train", str(text), "--out", str(tmp_path / "m")), "no 'timestamp' column")
    nopower = tmp_path / "nopower.csv"
    nopower.write_text("timestamp,bpf_cpu_time_us,package_power\n1,5,0\n4,6,0\n7,7,0\n")
    assert_clear(run("train", str(nopower), "--out", str(tmp_path / "m")), "has no measured power")
    badnum = tmp_path / "badnum.csv"
    badnum.write_text("timestamp,bpf_cpu_time_us,package_power\n1,5,10\n4,lots,11\n7,7,12\n")
    assert_clear(run("train", str(badnum), "--out", str(tmp_path / "m")), "row 3, column bpf_cpu_time_us")
    backwards = tmp_path / "backwards.csv"
    backwards.write_text("timestamp,bpf_cpu_time_us,package_power\n7,5,10\n4,6,11\n9,7,12\n")
    assert_clear(run("train", str(backwards), "--out", str(tmp_path / "m")), "timestamps do not increase")


def _model_dir(recording, tmp_path):
    out = str(tmp_path / "good")
    assert run("train", recording, "--out", out, "--rounds", "3").returncode == 0
    return out


@pytest.mark.parametrize("edit, phrase", [
    (lambda m: m.update(format="other/9"), "unknown format"),
    (lambda m: m.update(output="sideways"), "neither \"absolute\" nor \"dynamic\""),
    (lambda m: m["targets"][0].update(file="../../etc/passwd"), "must be a relative name"),
    (lambda m: m["targets"][0].update(zone="toaster"), "unknown target zone"),
    (lambda m: m.pop("features"), "missing or mistyped field \"features\""),
    # A feature dropped with its training range, so only the booster's width is wrong.
    (lambda m: m.get("training_range", {}).pop(m["features"].pop()["name"], None), "booster takes"),
])
def test_bad_model_directories_are_refused(recording, tmp_path, edit, phrase):
    good = _model_dir(recording, tmp_path)
    bad = str(tmp_path / "bad")
    shutil.copytree(good, bad)
    meta = json.load(open(os.path.join(bad, "model.json")))
    edit(meta)
    json.dump(meta, open(os.path.join(bad, "model.json"), "w"))
    assert_clear(run("analyze", recording, "--model", bad, "--out", str(tmp_path / "x.png")), phrase)


def test_broken_booster_and_missing_model(recording, tmp_path):
    good = _model_dir(recording, tmp_path)
    with open(os.path.join(good, "package.json"), "w") as f:
        f.write("{not a booster")
    assert_clear(run("analyze", recording, "--model", good, "--out", str(tmp_path / "x.png")),
                 "package.json: not an XGBoost model")
    assert_clear(run("analyze", recording, "--model", str(tmp_path / "nothing"), "--out", str(tmp_path / "x.png")),
                 "no model here")


def test_model_needing_csv_features_is_refused_on_a_recording(recording, tmp_path):
    csv = tmp_path / "k.csv"
    csv.write_text("timestamp,bpf_cpu_time_us,kubelet_cpu_usage,package_power\n" +
                   "".join("%d,%d,%d,%d\n" % (3 * i, i * 100, i, 50 + i) for i in range(30)))
    # (--csv-columns: without it train leaves the CSV-only column out and the model would serve)
    assert run("train", str(csv), "--out", str(tmp_path / "csvmodel"), "--rounds", "3", "--csv-columns").returncode == 0
    assert_clear(run("analyze", recording, "--model", str(tmp_path / "csvmodel"), "--out", str(tmp_path / "x.png")),
                 "csv:kubelet_cpu_usage (not in this source)")


def test_bad_estimates_csv(tmp_path):
    est = tmp_path / "est.csv"
    est.write_text("interval_end_ns,watts\n1,2\n")
    assert_clear(run("plot", str(est), "--out", str(tmp_path / "p.png")), "missing column(s) level, id, name")
    est.write_text("interval_end_ns,level,id,name,zone,mode,joules,watts,model\n1,node,n,n,package,dynamic,1,nan,x\n")
    assert_clear(run("plot", str(est), "--out", str(tmp_path / "p.png")), "row 2: watts nan is not finite")
    est.write_bytes(b"\xff\xfe\x00garbage")
    assert_clear(run("plot", str(est), "--out", str(tmp_path / "p.png")), "not")


def test_record_from_a_missing_segment(tmp_path):
    assert_clear(run("record", "--shm-name", "no-such-segment-kpy", "--out", str(tmp_path / "r.kshm"),
                     "--duration", "1"), "cannot open segment 'no-such-segment-kpy'")
