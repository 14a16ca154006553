#!/usr/bin/python3
"""Reference predictions of Kepler's own stack for every model file of a Kepler model-DB folder, on
deterministic feature rows, as JSON on stdout. Test-only: it runs joblib.load (which executes pickle
code) on the committed, trusted scaler.pkl files; the product never does.

- XgboostFitTrainer_N.zip: scikit-learn's MaxAbsScaler.transform, then Python xgboost per zone
  (what kepler-model-server's estimator does).
- SGDRegressorTrainer_N.json: Kepler 0.7's Go formula (pkg/model/estimator/local/regressor):
  Bias_Weight + sum over features with weight != 0 of weight * value / scale (scale 0 contributes 0).
"""
import argparse
import json
import os
import random
import tempfile
import warnings
import zipfile

import joblib
import numpy as np
import xgboost as xgb

# Per-interval node totals as Kepler 0.7 computed them (3 s), spanning idle to a busy 96-CPU node.
RANGES = {
    "bpf_cpu_time_ms": 288000.0,
    "bpf_page_cache_hit": 200000.0,
    "bpf_net_tx_irq": 5000.0,
    "bpf_net_rx_irq": 8000.0,
    "bpf_block_irq": 3000.0,
    "cpu_cycles": 1e12,
    "cpu_instructions": 1e12,
    "cache_miss": 1e9,
}


def rows(count):
    rng = random.Random(15)
    out = [{name: 0.0 for name in RANGES}]
    for _ in range(count - 1):
        out.append({name: round(rng.uniform(0, top) * rng.choice([0.01, 0.1, 1.0]), 3) for name, top in RANGES.items()})
    return out


def go_linear(doc, feature_rows):
    result = {}
    for zone, body in doc.items():
        if not isinstance(body, dict) or "All_Weights" not in body:
            continue
        weights = body["All_Weights"]
        preds = []
        for row in feature_rows:
            power = weights.get("Bias_Weight", 0.0)
            for name, coeff in weights["Numerical_Variables"].items():
                if coeff.get("weight", 0.0) == 0 or coeff.get("scale", 0.0) == 0:
                    continue
                power += coeff["weight"] * (row[name] / coeff["scale"])
            preds.append(power)
        result[zone] = preds
    return result


def xgboost_zip(path, feature_rows):
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(path) as z:
            z.extractall(tmp)
        meta = json.load(open(os.path.join(tmp, "metadata.json")))
        zones = json.load(open(os.path.join(tmp, meta["model_file"])))
        scaler = joblib.load(os.path.join(tmp, "scaler.pkl"))
        x = np.array([[row[f] for f in meta["features"]] for row in feature_rows], dtype=np.float64)
        scaled = scaler.transform(x)
        result = {}
        for zone, body in zones.items():
            booster = xgb.Booster()
            booster.load_model(os.path.join(tmp, body["model_file"]))
            result[zone] = [float(v) for v in booster.predict(xgb.DMatrix(scaled))]
        return result, [float(s) for s in scaler.scale_]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    # Debian's scikit-learn 1.2 warns that the scalers were pickled by 1.5.1; MaxAbsScaler's state
    # (scale_, max_abs_) is the same in both.
    warnings.filterwarnings("ignore", category=UserWarning)
    feature_rows = rows(args.rows)
    models = {}
    scalers = {}
    for dirpath, _, files in os.walk(args.db):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, args.db)
            if name.startswith("SGDRegressorTrainer_") and name.endswith(".json"):
                models[rel] = go_linear(json.load(open(path)), feature_rows)
            elif name.startswith("XgboostFitTrainer_") and name.endswith(".zip"):
                models[rel], scalers[rel] = xgboost_zip(path, feature_rows)
    with open(args.out, "w") as out:
        json.dump({"rows": feature_rows, "models": models, "scalers": scalers}, out)


if __name__ == "__main__":
    main()
