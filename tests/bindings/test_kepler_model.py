"""`python3 -m keplershm kepler-model`: Kepler 0.7's model-DB files predicted in Python with the same
restricted scaler reader as kepler-estimate, checked against Kepler's own stack (joblib + scikit-learn's
MaxAbsScaler + xgboost for the zips, the Go formula for the weights) on every committed file; hostile
scalers and archives refused."""
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import warnings
import zipfile

import pytest

from keplershm.errors import InputError
from keplershm.research.kepler_model import KeplerModel, read_max_abs_scaler

PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)
DB = os.path.join(os.environ.get("KEPLERSHM_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", "data")),
                  "kepler-model-db", "ec2-0.7.11")
FILES = sorted(glob.glob(os.path.join(DB, "rapl-sysfs", "*", "*", "*")))
TOPS = {"bpf_cpu_time_ms": 288000.0, "bpf_page_cache_hit": 2e5, "bpf_net_tx_irq": 5e3, "bpf_net_rx_irq": 8e3,
        "bpf_block_irq": 3e3}


def rows():
    rng = random.Random(7)
    return [{k: 0.0 for k in TOPS}] + [{k: rng.uniform(0, top) * rng.choice([0.01, 0.1, 1]) for k, top in TOPS.items()}
                                        for _ in range(15)]


def kepler_stack(path, feature_rows):
    """Kepler's own evaluation (joblib.load runs pickle code: fine on these committed, trusted test files)."""
    if path.endswith(".json"):
        doc = json.load(open(path))
        return [{z: body["All_Weights"]["Bias_Weight"] + sum(
            c["weight"] * (row[f] / c["scale"]) for f, c in body["All_Weights"]["Numerical_Variables"].items()
            if c.get("weight") and c.get("scale")) for z, body in doc.items()} for row in feature_rows]
    joblib = pytest.importorskip("joblib")
    pytest.importorskip("sklearn")
    import numpy as np
    import xgboost as xgb
    with tempfile.TemporaryDirectory() as tmp:
        zipfile.ZipFile(path).extractall(tmp)
        meta = json.load(open(os.path.join(tmp, "metadata.json")))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn 1.2 reading a 1.5.1 MaxAbsScaler: same state
            scaler = joblib.load(os.path.join(tmp, "scaler.pkl"))
        x = scaler.transform(np.array([[r[f] for f in meta["features"]] for r in feature_rows]))
        out = [{} for _ in feature_rows]
        for zone, body in json.load(open(os.path.join(tmp, meta["model_file"]))).items():
            booster = xgb.Booster()
            booster.load_model(os.path.join(tmp, body["model_file"]))
            for i, v in enumerate(booster.predict(xgb.DMatrix(x))):
                out[i][zone] = float(v)
        return out


def test_the_subset_has_every_file():
    assert len(FILES) == 23


@pytest.mark.parametrize("path", FILES, ids=[os.path.relpath(f, DB) for f in FILES])
def test_predictions_equal_keplers_stack(path):
    model = KeplerModel(path)
    feature_rows = rows()
    for row, theirs in zip(feature_rows, kepler_stack(path, feature_rows)):
        ours = model.predict(row)
        assert ours.keys() == theirs.keys()
        for zone, watts in theirs.items():
            assert ours[zone] == pytest.approx(watts, rel=1e-4, abs=1e-9), (zone, row)


def test_hostile_and_broken_scalers_are_refused():
    with pytest.raises(InputError, match="global os.system is not allowed"):
        read_max_abs_scaler(b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x04true\x85R.")
    with pytest.raises(InputError, match="opcode 0x63"):
        read_max_abs_scaler(b"cos\nsystem\n(S'true'\ntR.")
    good = zipfile.ZipFile(os.path.join(DB, "rapl-sysfs/AbsPower/BPFIRQ/XgboostFitTrainer_0.zip")).read("scaler.pkl")
    assert len(read_max_abs_scaler(good)) == 5
    for n in range(len(good)):
        with pytest.raises(InputError):
            read_max_abs_scaler(good[:n])


# PROTO 4, NONE, 200,000 x TUPLE1, STOP: 200 KB that would build a 200,000-deep tuple.
DEEP_TUPLES = b"\x80\x04N" + b"\x85" * 200000 + b"."


def test_deeply_nested_values_are_refused_at_32_levels():
    # The 32nd TUPLE1 would make a 33-deep value: refused there, at its byte, before any deep walk.
    with pytest.raises(InputError, match=r"nest deeper than 32 levels \(at byte 35\)"):
        read_max_abs_scaler(DEEP_TUPLES)
    # A 32-deep value is still built (then refused as not being a scaler).
    with pytest.raises(InputError, match="not a MaxAbsScaler"):
        read_max_abs_scaler(b"\x80\x04N" + b"\x85" * 31 + b".")


def test_a_value_cannot_change_once_another_holds_it():
    # }q\x00 (memo 0 = dict), TUPLE1 holds it, then SETITEM into memo 0: the tuple would change depth
    # after its depth was counted (and could come to hold itself).
    pickle = b"\x80\x04}q\x00\x85h\x00\x8c\x01kNs."
    with pytest.raises(InputError, match="already inside another"):
        read_max_abs_scaler(pickle)


def test_a_model_zip_whose_scaler_nests_deep_is_refused(tmp_path):
    pytest.importorskip("xgboost")
    source = os.path.join(DB, "rapl-sysfs/AbsPower/BPFIRQ/XgboostFitTrainer_0.zip")
    hostile = tmp_path / "deep.zip"
    with zipfile.ZipFile(source) as good, zipfile.ZipFile(hostile, "w", zipfile.ZIP_DEFLATED) as out:
        for info in good.infolist():
            out.writestr(info.filename, DEEP_TUPLES if info.filename == "scaler.pkl" else good.read(info))
    with pytest.raises(InputError, match="scaler.pkl: values nest deeper than 32 levels"):
        KeplerModel(str(hostile))


def test_bad_archives_are_refused(tmp_path):
    (tmp_path / "garbage.zip").write_bytes(b"PK\x03\x04 not a zip")
    with zipfile.ZipFile(tmp_path / "evil.zip", "w") as z:
        z.writestr("../evil.json", "{}")
    for name in ("garbage.zip", "evil.zip"):
        with pytest.raises(InputError):
            KeplerModel(str(tmp_path / name))


def run_cli(*args):
    return subprocess.run([PYTHON, "-m", "keplershm", "kepler-model", *args], capture_output=True, text=True, timeout=120)


def test_cli_prints_watts_per_zone_as_json():
    path = os.path.join(DB, "rapl-sysfs/AbsPower/BPFOnly/SGDRegressorTrainer_0.json")
    done = run_cli(path, "--predict", "bpf_cpu_time_ms=12000,bpf_page_cache_hit=30")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"package", "core", "uncore", "dram"}
    assert out == pytest.approx(kepler_stack(path, [{"bpf_cpu_time_ms": 12000, "bpf_page_cache_hit": 30}])[0])
    missing = run_cli(path, "--predict", "bpf_cpu_time_ms=12000")
    assert missing.returncode == 2 and "missing: bpf_page_cache_hit" in missing.stderr
