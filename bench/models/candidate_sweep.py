#!/usr/bin/python3
"""Measures XGBoost settings that train does not use as candidates, on the same blocked folds as
accuracy_table.py: the evidence behind bindings/python/README.md's "Tried and left out". Every setting is
a plain XGBoost booster (kepler-estimate could serve it unchanged); each cell is blocked-CV MAE mean /
worst fold in W. Then two tables that are not candidates: how well each block can be predicted by
models that saw its rows' neighbours (the floor under what a goal may ask of these features), and the
recent load (trailing means of CPU time) as features, which kepler-estimate could not serve today.

    KEPLERSHM_LIBRARY=build/lib/libkeplershm.so.1 /usr/bin/python3 bench/models/candidate_sweep.py

Deterministic (seeded, one thread), ~3.5 min. These settings were looked at on the folds that report
them: a setting that wins here by a little has not shown that it generalizes.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))
sys.path.insert(0, HERE)

from accuracy_table import ROWS, ZONES  # noqa: E402
from keplershm import train  # noqa: E402
from keplershm.dataset import load  # noqa: E402
from keplershm.model import select_columns  # noqa: E402
from keplershm.schema import np  # noqa: E402
from keplershm.validation import blocked_cv  # noqa: E402

COUNTERS_AND_SOFTIRQS = ("cycles_per_s", "instructions_per_s", "cache_misses_per_s", "softirq_net_tx_per_s",
                         "softirq_net_rx_per_s", "softirq_block_per_s")


def monotone_on(wanted):
    """A monotone_constraints builder: +1 on the physical features named in `wanted` only."""
    return lambda names: "(%s)" % ",".join("1" if n in wanted else "0" for n in names)


def additive(names):
    """interaction_constraints letting no tree mix two features: power as a sum of one-feature curves."""
    return json.dumps([[i] for i in range(len(names))])


# (name, XGBoost parameters over train.PARAMS, monotone constraint builder or None, rounds)
SETTINGS = [
    # hist: only there does 1.7 set leaves to residual medians (exact takes ±1 gradient steps, far too small)
    ("absolute error (hist)", {"objective": "reg:absoluteerror", "tree_method": "hist"}, None, 200),
    ("absolute error (hist), monotone", {"objective": "reg:absoluteerror", "tree_method": "hist"},
     train.monotone_constraints, 200),
    ("pseudo-Huber 20 W", {"objective": "reg:pseudohubererror", "huber_slope": 20.0, "base_score": "median"}, None,
     200),
    ("min_child_weight 50, depth 4", {"max_depth": 4, "min_child_weight": 50}, None, 200),
    ("min_child_weight 200, depth 4", {"max_depth": 4, "min_child_weight": 200}, None, 200),
    ("min_child_weight 50, depth 4, monotone", {"max_depth": 4, "min_child_weight": 50},
     train.monotone_constraints, 200),
    ("min_child_weight 100, depth 4, monotone", {"max_depth": 4, "min_child_weight": 100},
     train.monotone_constraints, 200),
    ("min_child_weight 200, depth 4, monotone", {"max_depth": 4, "min_child_weight": 200},
     train.monotone_constraints, 200),
    ("subsample, colsample 0.7, depth 4", {"max_depth": 4, "subsample": 0.7, "colsample_bytree": 0.7}, None, 200),
    ("eta 0.03, 300 rounds, depth 3", {"max_depth": 3, "eta": 0.03}, None, 300),
    ("depth 2", {"max_depth": 2}, None, 200),
    ("depth 2, monotone", {"max_depth": 2}, train.monotone_constraints, 200),
    ("hist, max_bin 32", {"tree_method": "hist", "max_bin": 32}, None, 200),
    ("monotone except CPU time", {}, monotone_on(COUNTERS_AND_SOFTIRQS), 200),
    ("additive (no interactions)", {"interaction_constraints": additive}, None, 200),
    ("additive, monotone", {"interaction_constraints": additive}, train.monotone_constraints, 200),
]


def setting_params(params, monotone, names):
    """The parameters of one setting on these feature columns (builders called, one thread)."""
    resolved = {k: (v(names) if callable(v) else v) for k, v in params.items()}
    if monotone is not None:
        resolved["monotone_constraints"] = monotone(names)
    return dict(resolved, nthread=1)


def fit_predict_with(params, rounds):
    """Like train.fit_predict_with; base_score "median" is the training rows' median (a robust objective
    starts from 0.5 otherwise, and 200 bounded steps do not reach ~100 W)."""
    def fit_predict(X_train, y_train, X_test):
        p = dict(params)
        if p.get("base_score") == "median":
            p["base_score"] = float(np.median(y_train))
        return train.predict(train.fit(X_train, y_train, rounds, p), X_test)
    return fit_predict


def title(group, csv_columns, zone):
    """Column titles as in the README's tables, written when Basic's default was all columns: "Basic" is
    Basic with its CSV-only columns, "Basic frame" train's default (the frame features)."""
    return "%s%s %s" % (group, " frame" if group == "Basic" and not csv_columns else "", zone)


def zones_of(data, rows):
    """(title, feature names, X, y, time_s) per row of `rows` and zone, measured rows only."""
    for group, label, features, csv_columns in rows:
        table = load(os.path.join(data, "nx12_rapl_abs_%s.csv" % group))
        names = train.choose_features(table, features, csv_columns)
        X_all = select_columns(table, names, "measured")
        for zone in ZONES:
            measured = ~np.isnan(table.targets[zone])
            yield (title(group, csv_columns, zone), names, X_all[measured], table.targets[zone][measured],
                   table.time_s[measured])


def sweep(data, rows):
    """{setting name: [cell text per (row, zone)]}, and the column titles."""
    cells = {name: [] for name, _, _, _ in SETTINGS}
    titles = []
    for title, names, X, y, time_s in zones_of(data, rows):
        titles.append(title)
        for name, params, monotone, rounds in SETTINGS:
            cv = blocked_cv(fit_predict_with(setting_params(params, monotone, names), rounds), X, y, time_s)
            cells[name].append("%.2f / %.2f" % (cv.mean_mae_w, cv.worst_mae_w))
    return cells, titles


def floors(data, rows):
    """{title: train.Floor}: per block of blocked CV, how well it can be predicted by models that saw its
    rows' neighbours 3 s away (validation.neighbour_cv, the lowest of train's candidates per block): trained
    on the block's own other rows, and on all other rows. Both tasks are easier than blocked CV's, which
    sees nothing of the block; where both are above a goal on a block, the goal asks more than the
    features carry there."""
    return {title: train.neighbour_floor(X, y, time_s, names, train.CANDIDATES.values())
            for title, names, X, y, time_s in zones_of(data, rows)}


HISTORY_ROWS = (10, 60)  # 30 s and 3 min of nx12's 3 s rows


def trailing_mean(values, rows):
    """Each row's mean over itself and the `rows` - 1 rows before it (fewer at the start): what a live
    estimator could keep, since it looks back only."""
    sums = np.cumsum(np.insert(values, 0, 0.0))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(0, ends - rows)
    return (sums[ends] - sums[starts]) / (ends - starts)


def history_features(data, rows):
    """{(title): (without, with)}: train's choice (lowest mean over its candidates) with the features as
    they are, and with trailing means of CPU time over HISTORY_ROWS rows added (the recent load, which
    heats the package and shifts power at the same CPU time). Not servable by kepler-estimate today:
    frames carry no history, so this is a measurement of the direction, not a candidate."""
    out = {}
    for group, label, features, csv_columns in rows:
        table = load(os.path.join(data, "nx12_rapl_abs_%s.csv" % group))
        names = train.choose_features(table, features, csv_columns)
        if "cpu_time_ms_per_s" not in names:
            continue  # CounterOnly: no CPU time to average
        order = np.argsort(table.time_s, kind="stable")
        X_all = select_columns(table, names, "measured")[order]
        cpu_time = X_all[:, names.index("cpu_time_ms_per_s")]
        with_history = np.column_stack([X_all] + [trailing_mean(cpu_time, n) for n in HISTORY_ROWS])
        history_names = names + ["cpu_time_mean_%d_rows" % n for n in HISTORY_ROWS]
        for zone in ZONES:
            measured = ~np.isnan(table.targets[zone][order])
            y, time_s = table.targets[zone][order][measured], table.time_s[order][measured]
            cells = []
            for X, columns in ((X_all, names), (with_history, history_names)):
                cvs = {c.name: blocked_cv(train.fit_predict_with(dict(train.candidate_params(c, columns), nthread=1),
                                                                 train.ROUNDS), X[measured], y, time_s)
                       for c in train.CANDIDATES.values()}
                chosen = train.lowest_mean({n: [f.mae_w for f in cv.folds] for n, cv in cvs.items()})
                cells.append("%.2f / %.2f (%s)" % (cvs[chosen].mean_mae_w, cvs[chosen].worst_mae_w, chosen))
            out[title(group, csv_columns, zone)] = cells
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=os.path.join(HERE, "..", "..", "tests", "data", "kepler-model-db"))
    a = p.parse_args()
    cells, titles = sweep(a.data, ROWS)
    print("| setting | %s |" % " | ".join(titles))
    print("| --- |%s" % (" --- |" * len(titles)))
    for name, row in cells.items():
        print("| %s | %s |" % (name, " | ".join(row)))
    print("\n| group and zone | trained on the block's own other rows | trained on all rows but the part |")
    print("| --- | --- | --- |")
    for title, floor in floors(a.data, ROWS).items():
        print("| %s | %s | %s |" % (title, " / ".join("%.2f" % f for f in floor.own_block),
                                    " / ".join("%.2f" % f for f in floor.all_rows)))
    print("\n| group and zone | train's choice | with trailing means of CPU time over %s rows |" %
          " and ".join(str(n) for n in HISTORY_ROWS))
    print("| --- | --- | --- |")
    for title, (without, with_history) in history_features(a.data, ROWS).items():
        print("| %s | %s | %s |" % (title, without, with_history))
    return 0


if __name__ == "__main__":
    sys.exit(main())
