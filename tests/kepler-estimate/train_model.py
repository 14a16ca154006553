#!/usr/bin/python3
"""Trains a small keplershm XGBoost node model (MODELS.md format) on the real nx12 data, and
optionally predicts feature rows given by the C++ test, so that the estimator's predictions can be
compared with Python's on the same features.

The nx12 CSVs hold one row per 3-second interval; counters are per interval, so rates are value / 3.
`bpf_cpu_time_us` is taken as milliseconds per interval (see the data README: the magnitudes fit ms).
"""
import argparse
import csv
import json
import os
import sys

import numpy as np
import xgboost as xgb

INTERVAL_S = 3.0
# feature name (MODELS.md) -> (CSV file, column, scale to per-second units)
SOURCES = {
    "cpu_time_ms_per_s": ("nx12_rapl_abs_Basic.csv", "bpf_cpu_time_us", 1 / INTERVAL_S),
    "node_cpu_busy_ms_per_s": ("nx12_rapl_abs_Basic.csv", "bpf_cpu_time_us", 1 / INTERVAL_S),
    "cycles_per_s": ("nx12_rapl_abs_Basic.csv", "cpu_cycles", 1 / INTERVAL_S),
    "instructions_per_s": ("nx12_rapl_abs_Basic.csv", "cpu_instructions", 1 / INTERVAL_S),
    "cache_misses_per_s": ("nx12_rapl_abs_Basic.csv", "cache_miss", 1 / INTERVAL_S),
    "softirq_net_tx_per_s": ("nx12_rapl_abs_BPFIRQ.csv", "bpf_net_tx_irq", 1 / INTERVAL_S),
    "softirq_net_rx_per_s": ("nx12_rapl_abs_BPFIRQ.csv", "bpf_net_rx_irq", 1 / INTERVAL_S),
    "softirq_block_per_s": ("nx12_rapl_abs_BPFIRQ.csv", "bpf_block_irq", 1 / INTERVAL_S),
}
NX12_CPUS = 96


def column(data_dir, feature, rows):
    if feature == "cpu_count":
        return np.full(rows, float(NX12_CPUS))
    if feature.startswith("csv:"):  # a metric only the CSV has (e.g. kubelet): trainable, not servable
        name, col, scale = "nx12_rapl_abs_Basic.csv", feature[4:], 1.0
    else:
        name, col, scale = SOURCES[feature]
    with open(os.path.join(data_dir, name)) as f:
        values = [float(r[col]) * scale for r in csv.DictReader(f)]
    return np.array(values[:rows])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True, help="model directory to create")
    p.add_argument("--features", default="cpu_time_ms_per_s")
    p.add_argument("--zones", default="package")
    p.add_argument("--cpu-model", default="Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz")
    p.add_argument("--output", default="absolute", choices=["absolute", "dynamic"])
    p.add_argument("--format", default="json", choices=["json", "ubj"])
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--name", default="nx12-test")
    p.add_argument("--monotone", action="store_true", help="monotone constraints (+1) on every feature but cpu_count")
    p.add_argument("--expected-error-w", type=float, help="expected_error_w of every zone in the metadata")
    p.add_argument("--predict-in", help="CSV of feature rows (header: feature names) to predict")
    p.add_argument("--predict-out", help="CSV of predictions, one column per zone")
    a = p.parse_args()

    features = a.features.split(",")
    zones = a.zones.split(",")
    with open(os.path.join(a.data, "nx12_rapl_abs_Basic.csv")) as f:
        table = list(csv.DictReader(f))
    rows = len(table)
    x = np.column_stack([column(a.data, name, rows) for name in features]).astype(np.float32)
    os.makedirs(a.out, exist_ok=True)
    targets = []
    boosters = {}
    for zone in zones:
        y = np.array([float(r[zone + "_power"]) for r in table])
        if a.output == "dynamic":
            y = np.maximum(y - y.min(), 0.0)
        params = {"max_depth": a.depth, "eta": 0.3, "nthread": 1, "seed": 1}
        if a.monotone:
            params["monotone_constraints"] = "(%s)" % ",".join("0" if n == "cpu_count" else "1" for n in features)
        booster = xgb.train(params, xgb.DMatrix(x, label=y), a.rounds)
        file = f"{zone}.{a.format}"
        booster.save_model(os.path.join(a.out, file))
        targets.append({"zone": zone, "file": file})
        boosters[zone] = booster
    meta = {
        "format": "keplershm-model/1",
        "name": a.name,
        "version": "test",
        "type": "xgboost",
        "output": a.output,
        "features": [{"name": n, "unit": "ms/s" if n.endswith("ms_per_s") else "1/s"} for n in features],
        "targets": targets,
        "cpu": {"model": a.cpu_model, "count": NX12_CPUS},
        "training": {"source": "nx12_rapl_abs_Basic.csv", "rows": rows},
    }
    if a.expected_error_w is not None:
        meta["expected_error_w"] = {z: a.expected_error_w for z in zones}
    tmp = os.path.join(a.out, "model.json.tmp")
    with open(tmp, "w") as f:
        json.dump(meta, f, indent=2)
    os.replace(tmp, os.path.join(a.out, "model.json"))

    if a.predict_in:
        with open(a.predict_in) as f:
            reader = csv.DictReader(f)
            rows_in = [[float(r[n]) for n in features] for r in reader]
        x_in = np.array(rows_in, dtype=np.float64).astype(np.float32)
        with open(a.predict_out, "w") as f:
            f.write(",".join(zones) + "\n")
            preds = [boosters[z].predict(xgb.DMatrix(x_in)) for z in zones]
            for i in range(len(rows_in)):
                f.write(",".join(repr(float(p[i])) for p in preds) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
