"""analyze and plot write non-empty PNGs with the numbers they claim."""
import csv
import os
import subprocess
import sys

import pytest

import synthetic
from keplershm import dataset, model
from keplershm.research import analyze, plot

PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)
PNG = b"\x89PNG\r\n\x1a\n"


def run(*args):
    return subprocess.run([PYTHON, "-m", "keplershm", *args], capture_output=True, text=True, timeout=300)


def is_png(path):
    return os.path.getsize(path) > 5000 and open(path, "rb").read(8) == PNG


def test_analyze_compares_models_against_measured_power(recording, tmp_path):
    small, big = str(tmp_path / "small"), str(tmp_path / "big")
    assert run("train", recording, "--out", small, "--rounds", "5").returncode == 0
    assert run("train", recording, "--out", big, "--rounds", "80").returncode == 0
    png, table_csv = str(tmp_path / "ab.png"), str(tmp_path / "ab.csv")
    result = run("analyze", recording, "--model", "A=" + small, "--model", "B=" + big, "--model", "curve",
                 "--out", png, "--table", table_csv)
    assert result.returncode == 0, result.stderr
    assert is_png(png)
    rows = {(r["model"], r["zone"]): r for r in csv.DictReader(open(table_csv))}
    assert set(rows) == {("A", "package"), ("A", "dram"), ("B", "package"), ("B", "dram"), ("curve", "package")}
    # Five boosting rounds from 0.5 barely move towards ~60 W; eighty rounds fit the law.
    assert float(rows[("B", "package")]["mae_w"]) < float(rows[("A", "package")]["mae_w"])
    assert int(rows[("B", "package")]["rows"]) == 240
    # The table's numbers are the ones the models give.
    table = dataset.load(recording)
    b = model.load_model("B=" + big)
    results, _ = analyze.compare(table, [b])
    assert results[0]["mae_w"] == pytest.approx(float(rows[("B", results[0]["zone"])]["mae_w"]))


def test_curve_model_follows_models_md(recording):
    table = dataset.load(recording)
    watts = model.load_model("curve:idle_w=1,max_w=3").predict(table)["package"]
    cols = {n: j for j, n in enumerate(table.feature_names)}
    u = table.X[:, cols["node_cpu_busy_ms_per_s"]] / 1000 / 4
    assert watts == pytest.approx(4 * (1 + 2 * u))


def write_estimates(path, intervals=30, with_measured=True):
    cols = ["interval_end_ns", "level", "id", "name", "zone", "mode", "joules", "watts", "model"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for i in range(intervals):
            t = (i + 1) * 10**9
            load = synthetic.load_at(i)
            for model_name, bias in (("xgb", 1.0), ("curve", 5.0)):
                w.writerow([t, "node", "node", "node", "package", "dynamic", 40 * load + bias, 40 * load + bias,
                            model_name])
            if with_measured:
                w.writerow([t, "node", "node", "node", "package", "dynamic", 40 * load, 40 * load, "measured"])
            for c in range(12):
                watts = load * (c + 1)
                for mode in ("dynamic", "idle"):
                    w.writerow([t, "container", "c%02d" % c, "web-%d" % c, "package", mode, watts / 2, watts / 2, "xgb"])
            for p in range(3):
                w.writerow([t, "process", "%d" % (100 + p), "worker%d" % p, "package", "dynamic", p, p, "xgb"])


def test_plot_writes_a_png_with_the_panels(tmp_path):
    est, png = str(tmp_path / "est.csv"), str(tmp_path / "power.png")
    write_estimates(est)
    result = run("plot", est, "--out", png, "--top", "5")
    assert result.returncode == 0, result.stderr
    assert is_png(png)
    assert "node power per model vs measured" in result.stdout and "5 of 12 shown" in result.stdout
    assert "top processes" in result.stdout


def test_plot_ranks_containers_by_energy(tmp_path):
    est = str(tmp_path / "est.csv")
    write_estimates(est, with_measured=False)
    rows = plot.read_estimates(est)
    shown, total = plot._top(rows, "container", 3, "xgb")
    assert [name for (_, name), _ in shown] == ["web-11", "web-10", "web-9"] and total == 12
    t, w = dict(shown)[("c11", "web-11")]
    assert w[0] == pytest.approx(synthetic.load_at(0) * 12)  # dynamic + idle summed


def write_estimator_csv(path, model_name, bias):
    """kepler-estimate's --csv form: joules per interval split into dynamic and idle, one model per file."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["sequence", "interval_start_ns", "interval_end_ns", "level", "id", "name", "namespace", "zone",
                    "package", "dynamic_joules", "idle_joules", "model"])
        for i in range(20):
            start, end = i * 2 * 10**9, (i + 1) * 2 * 10**9  # 2 s intervals
            watts = 30 + 10 * synthetic.load_at(i) + bias
            for socket in ("0", "1"):
                w.writerow([i + 1, start, end, "node", "vm1", "vm1", "", "package", socket, "%.6f" % (watts * 0.8),
                            "%.6f" % (watts * 0.2), model_name])
            w.writerow([i + 1, start, end, "pod", "uid-1", "web", "default", "package", "all", "1.000000",
                        "1.000000", model_name])


def test_plot_reads_kepler_estimate_csvs_of_several_models(tmp_path):
    xgb, meter, png = str(tmp_path / "xgb.csv"), str(tmp_path / "meter.csv"), str(tmp_path / "p.png")
    write_estimator_csv(xgb, "xgb", 2.0)
    write_estimator_csv(meter, "rapl-node", 0.0)
    rows = plot.read_estimates(xgb)
    node = plot.series([r for r in rows if r["level"] == "node"], lambda r: r["model"])["xgb"][1]
    assert node[0] == pytest.approx(30 + 10 * synthetic.load_at(0) + 2.0)  # 2 sockets × `watts` J / 2 s
    result = run("plot", xgb, meter, "--measured", "rapl-node", "--out", png)
    assert result.returncode == 0, result.stderr
    assert is_png(png) and "vs measured" in result.stdout and "top pods (xgb)" in result.stdout
