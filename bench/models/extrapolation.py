#!/usr/bin/python3
"""What happens beyond the training range on Kepler's nx12 data, and whether the extrapolation slopes
(keplershm.extrapolation; `train --extrapolation-slopes`) help there. Per group, zone and forward-chained
fold k (block k predicted by a model of blocks < k: the regime change a model in service meets), with the
candidate train's rule picks without fold k: how many of the fold's rows lie outside the training range
(what kepler_model_extrapolating says), their MAE with the trees alone (flat beyond the range), with the
slopes added, and with each feature's excess capped at its range's width; and the whole fold's MAE,
trees alone / with the slopes.

    KEPLERSHM_LIBRARY=build/lib/libkeplershm.so.1 /usr/bin/python3 bench/models/extrapolation.py

Deterministic (seeded), ~2 min on one core.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))
sys.path.insert(0, HERE)

from accuracy_table import ROWS, ZONES, bench_arguments, load_group  # noqa: E402
from keplershm.model import select_columns  # noqa: E402
from keplershm import extrapolation  # noqa: E402
from keplershm.research import train  # noqa: E402
from keplershm.research.validation import blocked_folds  # noqa: E402
from keplershm.schema import np  # noqa: E402


def mae(y, predicted, rows=None):
    rows = np.ones(len(y), dtype=bool) if rows is None else rows
    return float(np.mean(np.abs(y[rows] - predicted[rows]))) if rows.any() else float("nan")


def capped_excess_watts(X, names, ranges, slopes):
    """excess_watts() with each feature's excess held within one width of its training range."""
    e = extrapolation.excess(X, names, ranges)
    for i, name in enumerate(names):
        if name in ranges:
            width = ranges[name][1] - ranges[name][0]
            e[:, i] = np.clip(e[:, i], -width, width)
    return sum((e[:, names.index(f)] * s for f, s in slopes.items()), np.zeros(len(X)))


def main():
    a = bench_arguments(__doc__)
    print("| group | zone | fold | model | rows outside the range | their MAE: trees alone / + slopes / + capped slopes "
          "| fold MAE: trees alone / + slopes |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    tally = {"trees": 0, "slopes": 0}
    for row in ROWS:
        group, label, features, csv_columns = row
        table = load_group(a.data, group)
        names, report = train.evaluate_table(table, features, a.rounds, 0, a.folds, csv_columns=csv_columns)
        X_all = select_columns(table, names, "being evaluated")
        for zone in ZONES:
            r = report.get(zone)
            if not isinstance(r, train.ZoneResult):
                continue
            rows = ~np.isnan(table.targets[zone])
            X, y, time_s = X_all[rows], table.targets[zone][rows], table.time_s[rows]
            blocks = [test for _, test in blocked_folds(time_s, a.folds)]
            for k in range(1, len(blocks)):
                fit_rows, test = np.concatenate(blocks[:k]), blocks[k]
                pick = r.nested[k][0]
                params = train.candidate_params(train.CANDIDATES[pick], names)
                trees = train.predict(train.fit(X[fit_rows], y[fit_rows], a.rounds, params), X[test])
                seen = X[test].astype(np.float32)
                ranges = extrapolation.training_range(X[fit_rows], names)
                outside = extrapolation.extrapolating(seen, names, ranges)
                slopes = extrapolation.excess_slopes(X[fit_rows], y[fit_rows], names, train.physical(names))
                sloped = np.maximum(trees + extrapolation.excess_watts(seen, names, ranges, slopes), 0.0)
                capped = np.maximum(trees + capped_excess_watts(seen, names, ranges, slopes), 0.0)
                if outside.any():
                    tally["slopes" if mae(y[test], sloped, outside) < mae(y[test], trees, outside) else "trees"] += 1
                print("| %s%s | %s | %d | %s | %d of %d | %.2f / %.2f / %.2f | %.2f / %.2f |" % (
                    group, " CSV columns" if csv_columns else "", zone, k + 1, pick, outside.sum(), len(test),
                    mae(y[test], trees, outside), mae(y[test], sloped, outside), mae(y[test], capped, outside),
                    mae(y[test], trees), mae(y[test], sloped)), flush=True)
    print("\nFolds with rows outside the range where the slopes' MAE there is lower: %d; the trees': %d" % (
        tally["slopes"], tally["trees"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
