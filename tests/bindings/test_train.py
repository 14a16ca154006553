"""train: features per MODELS.md, blocked cross-validation and a random split, a model directory
kepler-estimate can load."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import synthetic
from keplershm import dataset, features, model
from keplershm.research import train, validation

PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)
DATA = os.path.join(os.environ.get("KEPLERSHM_DATA_DIR", ""), "kepler-model-db")


def run(*args):
    return subprocess.run([PYTHON, "-m", "keplershm", *args], capture_output=True, text=True, timeout=300)


def test_features_follow_models_md(recording):
    table = dataset.load(recording)
    assert table.kind == "recording" and len(table.X) == 240
    cols = {n: j for j, n in enumerate(table.feature_names)}
    n = 100
    busy_ms = int(synthetic.load_at(n) * synthetic.CPU_COUNT * synthetic.NS) / 1e6
    row = table.X[n - 1]
    assert row[cols["cpu_time_ms_per_s"]] == pytest.approx(busy_ms, rel=1e-12)
    assert row[cols["node_cpu_busy_ms_per_s"]] == pytest.approx((busy_ms * 1e6 // 4) * 4 / 1e6, rel=1e-12)
    assert row[cols["cpu_count"]] == 4
    assert row[cols["page_cache_hits_per_s"]] == 5 * n * 10  # PAGE_CACHE valid on every record
    # No PMU in the synthetic node: hardware counters are unavailable, never zero.
    assert np.isnan(row[cols["cycles_per_s"]]) and "cycles_per_s" in table.unavailable
    # Target: package-0 + package-1 (two sockets), in watts.
    expected = int(synthetic.package_watts(busy_ms) * 0.6e6) + int(synthetic.package_watts(busy_ms) * 0.4e6)
    assert table.targets["package"][n - 1] == pytest.approx(expected / 1e6, rel=1e-12)
    assert set(table.targets) == {"package", "dram"}


def test_train_writes_a_model_kepler_estimate_can_load(recording, tmp_path):
    out = str(tmp_path / "synthetic-xgb")
    result = run("train", recording, "--out", out, "--rounds", "60")
    assert result.returncode == 0, result.stderr
    assert "blocked-CV MAE (W) per fold" in result.stdout and "feature cycles_per_s left out" in result.stderr
    meta = json.load(open(os.path.join(out, "model.json")))
    assert meta["format"] == "keplershm-model/1" and meta["type"] == "xgboost" and meta["output"] == "absolute"
    names = [f["name"] for f in meta["features"]]
    assert names == [n for n in features.FEATURES if n not in ("cycles_per_s", "instructions_per_s",
                                                                 "cache_misses_per_s")]
    assert all(f["unit"] == features.FEATURES[f["name"]].unit for f in meta["features"])
    assert {t["zone"] for t in meta["targets"]} == {"package", "dram"}
    assert meta["cpu"] == {"model": "Synthetic CPU @ 1.00GHz", "count": 4}
    for split in ("blocked_cv_mean", "blocked_cv_worst", "random_split"):
        assert set(meta["training"]["mae_w"][split]) == {"package", "dram"}
    # The law is learnable: random-split error is small against ~60 W.
    assert meta["training"]["mae_w"]["random_split"]["package"] < 2.0
    # Every fold is kept, and the model's expected error (what kepler-estimate exports) is the nested mean:
    # each fold graded on the choice made without it.
    folds = meta["training"]["blocked_cv"]["package"]["folds"]
    assert len(folds) == 5 and sum(f["rows"] for f in folds) == 240
    nested = meta["training"]["nested"]["package"]
    assert len(nested["folds"]) == 5 and nested["worst_mae_w"] == max(f["mae_w"] for f in nested["folds"])
    assert meta["expected_error_w"]["package"] == nested["mean_mae_w"]
    assert meta["training"]["rule"] == "forward worst"
    chosen = meta["training"]["chosen"]["package"]
    candidates = meta["training"]["candidates"]["package"]
    assert set(candidates) == set(train.CANDIDATES)
    assert all(len(c["forward_mae_w"]) == 4 for c in candidates.values())
    assert max(candidates[chosen]["forward_mae_w"]) == min(max(c["forward_mae_w"]) for c in candidates.values())
    assert meta["serves"]["node"] is True and meta["serves"]["csv_only_features"] == []
    # Where it was trained, so that kepler-estimate can say when a frame leaves it; no slopes by default.
    assert set(meta["training_range"]) == set(names)
    assert all(lo <= hi for lo, hi in meta["training_range"].values())
    assert meta["training_range"]["cpu_count"] == [4.0, 4.0] and "extrapolation" not in meta
    loaded = model.load_model(out)
    table = dataset.load(recording)
    predicted = loaded.predict(table)["package"]
    assert np.mean(np.abs(predicted - table.targets["package"])) < 2.0


def test_slopes_carry_predictions_beyond_the_training_range(recording, tmp_path):
    out = tmp_path / "sloped"
    result = run("train", recording, "--out", str(out), "--rounds", "30", "--extrapolation-slopes")
    assert result.returncode == 0, result.stderr
    meta = json.load(open(out / "model.json"))
    slopes = meta["extrapolation"]["package"]
    assert slopes and all(s > 0 for s in slopes.values()) and "cpu_count" not in slopes, slopes
    # The same boosters without slopes: the trees alone, flat beyond the range.
    shutil.copytree(out, tmp_path / "flat")
    del meta["extrapolation"]
    with open(tmp_path / "flat" / "model.json", "w") as f:
        json.dump(meta, f)
    table = dataset.load(recording)
    busier = table._replace(X=table.X * 2)  # every feature beyond its range on the busy rows
    sloped = model.load_model(str(out)).predict(busier)["package"]
    flat = model.load_model(str(tmp_path / "flat")).predict(busier)["package"]
    names = [f["name"] for f in meta["features"]]
    seen = model.select_columns(busier, names, "t").astype(np.float32).astype(np.float64)
    expected = sum(s * np.maximum(seen[:, names.index(f)] - meta["training_range"][f][1], 0.0) for f, s in slopes.items())
    assert (expected > 0).sum() > 50
    np.testing.assert_allclose(sloped - flat, expected, rtol=1e-9, atol=1e-9)
    assert np.array_equal(model.load_model(str(out)).predict(table)["package"],
                          model.load_model(str(tmp_path / "flat")).predict(table)["package"]), "inside: the trees"


@pytest.mark.parametrize("extra, message", [
    ({"training_range": {"nope": [0, 1]}}, "training_range names \"nope\", which is not among the features"),
    ({"training_range": {"cpu_count": [2, 1]}}, "must be [lowest, highest]"),
    ({"training_range": {"cpu_count": [0, 1]}, "extrapolation": {"gpu": {"cpu_count": 1}}}, "must be a target zone's"),
    ({"training_range": {"cpu_count": [0, 1]}, "extrapolation": {"package": {"cpu_count": -1}}}, "watts per unit >= 0"),
    ({"extrapolation": {"package": {"cpu_count": 1}}}, "has a slope for cpu_count, which has no training_range"),
])
def test_bad_training_ranges_and_slopes_are_refused(extra, message):
    doc = {"format": model.FORMAT, "type": "xgboost", "output": "absolute", "features": [{"name": "cpu_count"}],
           "targets": [{"zone": "package", "file": "p.json"}], **extra}
    with pytest.raises(Exception) as e:
        model.validate_metadata(doc, "model.json")
    assert message in str(e.value)


def test_train_refuses_input_without_measured_power(tmp_path, shm_name):
    import keplershm
    from keplershm.writer import Writer
    path = str(tmp_path / "vm.kshm")
    with Writer(shm_name, replace_live=True, cpu_count=2, metric_mask=1) as writer, \
            keplershm.Reader(shm_name) as reader, keplershm.Recorder(path) as recorder:
        for n in range(1, 30):
            d = writer.begin()
            d.header["interval_start_ns"], d.header["interval_end_ns"], d.header["metric_mask"] = n, n + 10**9, 1
            writer.commit(d)
            assert recorder.append_next(reader, 1000)[0] == 0
    result = run("train", path, "--out", str(tmp_path / "m"))
    assert result.returncode == 2
    assert "no measured power" in result.stderr
    assert not os.path.exists(str(tmp_path / "m" / "model.json"))


def test_kepler_csv_mapping(tmp_path):
    csv = tmp_path / "k.csv"
    csv.write_text("timestamp,bpf_cpu_time_us,cpu_cycles,kubelet_cpu_usage,package_power,core_power,dram_power,"
                   "node_type\n" + "".join("%d,%d,%d,%d,%f,0,%f,1\n" % (100 + 3 * i, 3000 * i, 9 * i, i, 10 + i,
                                                                        2 + i * 0.1) for i in range(20)))
    table = dataset.load(str(csv))
    assert table.feature_names == ["cpu_time_ms_per_s", "cycles_per_s", "csv:kubelet_cpu_usage"]
    assert table.X[5].tolist() == [5000.0, 15.0, 5.0]  # 15000 ms per 3 s; 45 cycles per 3 s; raw
    assert set(table.targets) == {"package", "dram"}  # core_power is all zero: not measured
    assert dataset.load_kepler_csv(str(csv), "us").X[5][0] == 5.0


def test_csv_only_columns_need_the_flag(tmp_path):
    csv = tmp_path / "k.csv"
    csv.write_text("timestamp,bpf_cpu_time_us,kubelet_cpu_usage,package_power,dram_power\n" + "".join(
        "%d,%d,%d,%f,%f\n" % (100 + 3 * i, 3000 * (i % 7), (i * 5) % 11, 10 + 2 * (i % 7), 2 + (i % 3))
        for i in range(40)))
    table = dataset.load(str(csv))
    assert train.choose_features(table) == ["cpu_time_ms_per_s"], "a default model is one a node can serve"
    assert train.choose_features(table, csv_columns=True) == ["cpu_time_ms_per_s", "csv:kubelet_cpu_usage"]
    assert train.choose_features(table, ["csv:kubelet_cpu_usage"]) == ["csv:kubelet_cpu_usage"], "named: kept"
    out = str(tmp_path / "node")
    result = run("train", str(csv), "--out", out, "--rounds", "10")
    assert result.returncode == 0, result.stderr
    assert "feature csv:kubelet_cpu_usage left out" in result.stderr and "will refuse" not in result.stderr
    meta = json.load(open(os.path.join(out, "model.json")))
    assert [f["name"] for f in meta["features"]] == ["cpu_time_ms_per_s"]
    assert meta["serves"] == {"node": True, "csv_only_features": [], "where": meta["serves"]["where"]}
    out = str(tmp_path / "offline")
    result = run("train", str(csv), "--out", out, "--rounds", "10", "--csv-columns")
    assert result.returncode == 0, result.stderr
    assert "kepler-estimate will refuse this model on a node" in result.stderr
    meta = json.load(open(os.path.join(out, "model.json")))
    assert meta["serves"]["node"] is False and meta["serves"]["csv_only_features"] == ["csv:kubelet_cpu_usage"]
    # A CSV with nothing a node computes says which flag would train on what it has.
    only = tmp_path / "only.csv"
    only.write_text("timestamp,kubelet_cpu_usage,package_power\n" + "".join(
        "%d,%d,%f\n" % (100 + 3 * i, i % 11, 10 + i % 5) for i in range(40)))
    result = run("train", str(only), "--out", str(tmp_path / "none"))
    assert result.returncode == 2 and "need --csv-columns" in result.stderr, result.stderr


@pytest.mark.skipif(not os.path.isdir(DATA), reason="tests/data/kepler-model-db not present")
def test_real_kepler_data_trains(tmp_path):
    out = str(tmp_path / "nx12")
    result = run("train", os.path.join(DATA, "nx12_rapl_abs_BPFOnly.csv"), "--out", out, "--rounds", "100")
    assert result.returncode == 0, result.stderr
    meta = json.load(open(os.path.join(out, "model.json")))
    assert [f["name"] for f in meta["features"]] == ["cpu_time_ms_per_s"]
    assert meta["training"]["rows"] == 2202
    mae = meta["training"]["mae_w"]
    assert 0 < mae["random_split"]["package"] < mae["blocked_cv_worst"]["package"] < 60


def test_explicit_features_must_exist(recording, tmp_path):
    result = run("train", recording, "--out", str(tmp_path / "m"), "--features", "cycles_per_s")
    assert result.returncode == 2 and "metric CYCLES is missing" in result.stderr
    result = run("train", recording, "--out", str(tmp_path / "m"), "--features", "watts_per_banana")
    assert result.returncode == 2 and "no feature(s) watts_per_banana" in result.stderr


def test_errors_helper():
    mae, mape = validation.errors(np.array([10.0, 20.0, 0.0]), np.array([11.0, 18.0, 1.0]))
    assert mae == pytest.approx(4 / 3) and mape == pytest.approx(10.0)
