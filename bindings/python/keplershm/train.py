"""Training XGBoost node power models that kepler-estimate serves.

One booster per measured zone (package, dram, ...), over node features per MODELS.md. Error is
measured twice, because the two answers differ a lot on real data:

* **time split**: train on the first 80 % of the rows in time, test on the last 20 % (what happens when
  the model meets workload levels it has not seen: the honest number for deployment);
* **random split**: a seeded random 80/20 split (what most published model tables report).

The boosters saved in the model directory are then trained on all rows. The metadata records both
errors, the feature units, the CPU the data came from and where it came from.
"""
import datetime
import json
import os
import sys

from .dataset import load
from .errors import InputError
from .features import FEATURES
from .model import FORMAT, _xgboost, feature_units, select_columns
from .schema import np

TRAIN_FRACTION = 0.8
MIN_ROWS = 10
PARAMS = {"objective": "reg:squarederror", "max_depth": 6, "eta": 0.1, "min_child_weight": 1, "subsample": 1.0,
          "nthread": 2, "seed": 0}
ROUNDS = 200


def choose_features(table, wanted=None):
    """Feature names to train on: `wanted` (all must be available), else every available one."""
    if wanted:
        unknown = [n for n in wanted if n not in table.feature_names]
        if unknown:
            raise InputError("%s has no feature(s) %s; it has: %s" % (table.source, ", ".join(unknown),
                                                                     ", ".join(table.feature_names)))
        unavailable = [n for n in wanted if n in table.unavailable]
        if unavailable:
            raise InputError("feature(s) unavailable in %s: %s" % (table.source, "; ".join(
                "%s (%s)" % (n, table.unavailable[n]) for n in unavailable)))
        return list(wanted)
    return [n for n in table.feature_names if n not in table.unavailable]


def errors(actual, predicted):
    """(MAE in W, MAPE in %): MAPE over rows whose measured power is above 0.5 W (no division by ~0)."""
    mae = float(np.mean(np.abs(predicted - actual)))
    keep = np.abs(actual) > 0.5
    mape = float(np.mean(np.abs((predicted[keep] - actual[keep]) / actual[keep])) * 100) if keep.any() else float("nan")
    return mae, mape


def fit(X, y, rounds=ROUNDS, params=None):
    xgboost = _xgboost()
    matrix = xgboost.DMatrix(X.astype(np.float32), label=y.astype(np.float32), missing=np.nan)
    return xgboost.train(dict(PARAMS, **(params or {})), matrix, num_boost_round=rounds)


def predict(booster, X):
    xgboost = _xgboost()
    return np.maximum(booster.predict(xgboost.DMatrix(X.astype(np.float32), missing=np.nan)).astype(np.float64), 0.0)


def split_errors(X, y, order, seed=0, rounds=ROUNDS):
    """{'time_split': (mae, mape), 'random_split': (mae, mape)} for one zone's rows."""
    n = len(y)
    cut = int(n * TRAIN_FRACTION)
    by_time = np.argsort(order, kind="stable")
    shuffled = np.random.default_rng(seed).permutation(n)
    out = {}
    for name, idx in (("time_split", by_time), ("random_split", shuffled)):
        train, test = idx[:cut], idx[cut:]
        booster = fit(X[train], y[train], rounds)
        out[name] = errors(y[test], predict(booster, X[test]))
    return out


def train_table(table, features=None, rounds=ROUNDS, seed=0):
    """Evaluates and trains one booster per measured zone. Returns (features, {zone: booster}, report)."""
    names = choose_features(table, features)
    if not names:
        raise InputError("%s: no feature is available to train on (%s)" % (
            table.source, "; ".join("%s: %s" % kv for kv in table.unavailable.items())))
    X_all = select_columns(table, names, "being trained")
    boosters, report = {}, {}
    for zone, y_all in table.targets.items():
        rows = ~np.isnan(y_all)
        if rows.sum() < MIN_ROWS:
            report[zone] = {"skipped": "only %d rows with measured %s power (at least %d needed)" %
                                       (int(rows.sum()), zone, MIN_ROWS)}
            continue
        X, y, t = X_all[rows], y_all[rows], table.time_s[rows]
        split = split_errors(X, y, t, seed, rounds)
        boosters[zone] = fit(X, y, rounds)
        report[zone] = {"rows": int(rows.sum()), **split}
    if not boosters:
        raise InputError("%s has no measured power with enough rows to train on: %s" % (
            table.source, "; ".join("%s: %s" % (z, r["skipped"]) for z, r in report.items()) or "no energy zones"))
    return names, boosters, report


def write_model(out_dir, name, table, names, boosters, report, rounds=ROUNDS):
    """Writes model.json and <zone>.json boosters into `out_dir` (created if needed)."""
    os.makedirs(out_dir, exist_ok=True)
    targets = []
    for zone, booster in boosters.items():
        booster.save_model(os.path.join(out_dir, "%s.json" % zone))
        targets.append({"zone": zone, "file": "%s.json" % zone})
    trained = {z: r for z, r in report.items() if "rows" in r}
    metadata = {
        "format": FORMAT,
        "name": name,
        "version": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "type": "xgboost",
        "output": "absolute",
        "features": feature_units(names),
        "targets": targets,
        "cpu": {"model": table.cpu_model, "count": int(table.cpu_count)},
        "training": {
            "source": os.path.basename(table.source),
            "source_kind": table.kind,
            "rows": int(len(table.X)),
            "mae_w": {s: {z: round(r[s][0], 4) for z, r in trained.items()} for s in ("time_split", "random_split")},
            "mape_pct": {s: {z: round(r[s][1], 3) for z, r in trained.items()} for s in ("time_split", "random_split")},
            "split": "time: first %d%% of rows in time vs the rest; random: seeded %d/%d" % (
                TRAIN_FRACTION * 100, TRAIN_FRACTION * 100, 100 - TRAIN_FRACTION * 100),
            "xgboost": dict(PARAMS, num_boost_round=rounds),
            "notes": list(table.notes),
        },
    }
    with open(os.path.join(out_dir, "model.json"), "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=2)
        f.write("\n")
    return metadata


def format_report(report, names):
    lines = ["features: " + ", ".join(names),
             "%-8s %6s  %14s %14s  %14s %14s" % ("zone", "rows", "time MAE (W)", "time MAPE (%)", "random MAE (W)",
                                                 "random MAPE (%)")]
    for zone, r in report.items():
        if "skipped" in r:
            lines.append("%-8s skipped: %s" % (zone, r["skipped"]))
        else:
            lines.append("%-8s %6d  %14.2f %14.1f  %14.2f %14.1f" % (zone, r["rows"], r["time_split"][0],
                                                                     r["time_split"][1], r["random_split"][0],
                                                                     r["random_split"][1]))
    return "\n".join(lines)


def main(args):
    """CLI: python3 -m keplershm train RECORDING|CSV --out DIR [--name N] [--features a,b] ..."""
    table = load(args.input, args.csv_cpu_time_unit)
    if args.cpu_model is not None:
        table = table._replace(cpu_model=args.cpu_model)
    if args.cpu_count is not None:
        table = table._replace(cpu_count=args.cpu_count)
    for note in table.notes:
        print("note: " + note, file=sys.stderr)
    for feature, why in table.unavailable.items():
        print("feature %s left out: %s" % (feature, why), file=sys.stderr)
    features = args.features.split(",") if args.features else None
    names, boosters, report = train_table(table, features, args.rounds, args.seed)
    name = args.name or os.path.basename(os.path.normpath(args.out))
    write_model(args.out, name, table, names, boosters, report, args.rounds)
    print(format_report(report, names))
    csv_only = [n for n in names if n not in FEATURES]
    print("model %s written to %s" % (name, args.out))
    if csv_only:
        print("note: features %s exist only in the CSV: kepler-estimate will refuse this model on a node (train "
              "with --features from: %s to serve it)" % (", ".join(csv_only), ", ".join(n for n in names if n in FEATURES)),
              file=sys.stderr)
    return 0
