"""Offline A/B comparison of power models against measured power, and train's blocked cross-validation
shown fold by fold.

Every model sees the same rows (features computed once from the recording, per MODELS.md), so the
differences in the table and the plot are the models' alone. Per model and zone: MAE, MAPE, RMSE,
bias (mean predicted − measured) and mean power; the PNG shows measured and predicted power over time,
and each model's error over time, one row of panels per zone.

With ``--cv`` it runs train's evaluation instead (:func:`keplershm.research.train.evaluate_table`): each
candidate's error per contiguous fold, and a plot of measured power against each row's out-of-fold
prediction (made by the model that never saw its block), folds marked, one row of panels per zone.
``--floor`` adds how well each fold can be predicted at all (train.Floor: by models that saw its rows'
neighbours): a fold far above its floor is a model failing to generalize, a high floor is power the
features do not carry.
"""
import csv
import sys

from ..dataset import load
from ..errors import InputError
from ..model import load_model
from ..schema import np
from .train import ZoneResult, evaluate_table, format_report


def compare(table, models):
    """[{model, zone, rows, mae_w, mape_pct, rmse_w, bias_w, mean_measured_w, mean_predicted_w}], predictions."""
    predictions = {m.name: m.predict(table) for m in models}
    results = []
    for model in models:
        for zone, predicted in predictions[model.name].items():
            measured = table.targets.get(zone)
            row = {"model": model.name, "zone": zone, "mean_predicted_w": float(np.mean(predicted))}
            if measured is None:
                row.update(rows=0, mae_w=float("nan"), mape_pct=float("nan"), rmse_w=float("nan"),
                           bias_w=float("nan"), mean_measured_w=float("nan"))
            else:
                keep = ~np.isnan(measured)
                err = predicted[keep] - measured[keep]
                big = np.abs(measured[keep]) > 0.5
                row.update(rows=int(keep.sum()), mae_w=float(np.mean(np.abs(err))),
                           mape_pct=float(np.mean(np.abs(err[big] / measured[keep][big])) * 100) if big.any() else float("nan"),
                           rmse_w=float(np.sqrt(np.mean(err ** 2))), bias_w=float(np.mean(err)),
                           mean_measured_w=float(np.mean(measured[keep])))
            results.append(row)
    return results, predictions


COLUMNS = ("model", "zone", "rows", "mae_w", "mape_pct", "rmse_w", "bias_w", "mean_measured_w", "mean_predicted_w")


def format_table(results):
    head = "%-20s %-8s %6s %9s %9s %9s %9s %10s %10s" % ("model", "zone", "rows", "MAE W", "MAPE %", "RMSE W",
                                                         "bias W", "measured W", "predicted W")
    lines = [head]
    for r in results:
        lines.append("%-20s %-8s %6d %9.2f %9.1f %9.2f %9.2f %10.2f %10.2f" % tuple(r[c] for c in COLUMNS))
    return "\n".join(lines)


def write_table(results, path, columns=COLUMNS):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(results)


def plot(table, predictions, out):
    """Measured vs predicted over time (left) and error over time (right), one row per zone."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    zones = sorted({z for p in predictions.values() for z in p}, key=lambda z: (z != "package", z))
    fig, axes = plt.subplots(len(zones), 2, figsize=(14, 3.6 * len(zones)), squeeze=False)
    t = table.time_s - table.time_s[0]
    for (left, right), zone in zip(axes, zones):
        measured = table.targets.get(zone)
        if measured is not None:
            left.plot(t, measured, color="black", linewidth=1.6, label="measured", zorder=5)
        for name, p in predictions.items():
            if zone in p:
                left.plot(t, p[zone], linewidth=0.9, label=name)
                if measured is not None:
                    right.plot(t, p[zone] - measured, linewidth=0.9, label=name)
        left.set_title("%s power" % zone)
        left.set_ylabel("W")
        right.set_title("%s error (predicted − measured)" % zone if measured is not None else
                        "%s: no measured power in this source" % zone)
        right.axhline(0, color="grey", linewidth=0.5)
        for ax in (left, right):
            ax.set_xlabel("s since first row")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


FOLD_COLUMNS = ("zone", "candidate", "chosen", "fold", "start_s", "end_s", "rows", "mae_w", "mape_pct",
                "floor_own_block_w", "floor_all_rows_w")


def fold_rows(report):
    """One row per zone, candidate and fold of an evaluate_table() report."""
    rows = []
    for zone, r in report.items():
        if not isinstance(r, ZoneResult):
            continue
        for name, cv in r.candidates.items():
            rows.extend({"zone": zone, "candidate": name, "chosen": name == r.chosen, "fold": f.index + 1,
                         "start_s": f.start_s, "end_s": f.end_s, "rows": f.rows, "mae_w": f.mae_w,
                         "mape_pct": f.mape_pct,
                         "floor_own_block_w": r.floor.own_block[f.index] if r.floor else None,
                         "floor_all_rows_w": r.floor.all_rows[f.index] if r.floor else None} for f in cv.folds)
    return rows


def plot_folds(table, report, out):
    """Per zone: measured power and every candidate's out-of-fold prediction over time, fold borders and
    the chosen candidate's MAE per fold marked (left); each candidate's MAE per fold, and the floor under
    it when evaluated (right)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    zones = [z for z, r in report.items() if isinstance(r, ZoneResult)]
    fig, axes = plt.subplots(len(zones), 2, figsize=(15, 3.8 * len(zones)), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 1]})
    origin = table.time_s.min()
    for (left, right), zone in zip(axes, zones):
        r = report[zone]
        rows = ~np.isnan(table.targets[zone])
        t = table.time_s[rows] - origin
        order = np.argsort(t, kind="stable")
        left.plot(t[order], table.targets[zone][rows][order], color="black", linewidth=1.4, label="measured", zorder=5)
        for name, cv in r.candidates.items():
            left.plot(t[order], cv.predicted[order], linewidth=1.1 if name == r.chosen else 0.6,
                      label="%s (out of fold)%s" % (name, ", chosen" if name == r.chosen else ""))
        for f in r.blocked_cv.folds:
            left.axvline(f.start_s - origin, color="grey", linewidth=0.6, linestyle="--")
            left.annotate("fold %d: %.1f W" % (f.index + 1, f.mae_w), xy=(f.start_s - origin, 1.0),
                          xycoords=("data", "axes fraction"), xytext=(3, -12), textcoords="offset points", fontsize=8)
        left.set_title("%s power: measured vs predicted on held-out time blocks" % zone)
        left.set_ylabel("W")
        left.set_xlabel("s since first row")
        left.legend(loc="lower right", fontsize=7)
        width = 0.8 / max(1, len(r.candidates))
        for i, (name, cv) in enumerate(r.candidates.items()):
            right.bar([f.index + 1 + (i - (len(r.candidates) - 1) / 2) * width for f in cv.folds],
                      [f.mae_w for f in cv.folds], width=width, label=name)
        if r.floor:
            folds = [f.index + 1 for f in r.blocked_cv.folds]
            right.plot(folds, r.floor.own_block, "k_", markersize=22, mew=2, label="floor: own block")
            right.plot(folds, r.floor.all_rows, "kx", markersize=7, label="floor: all rows")
        right.set_title("%s MAE per fold" % zone)
        right.set_xlabel("fold (in time)")
        right.set_ylabel("W")
        right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def cross_validate(args):
    """analyze --cv: train's blocked cross-validation, fold by fold, with its plot."""
    table = load(args.input, args.csv_cpu_time_unit)
    names, report = evaluate_table(table, args.features.split(",") if args.features else None, args.rounds, 0,
                                   args.folds, args.candidates.split(",") if args.candidates else None, args.floor)
    print(format_report(report, names))
    if args.table:
        write_table(fold_rows(report), args.table, FOLD_COLUMNS)
    plot_folds(table, report, args.out)
    print("plot written to %s" % args.out)
    return 0


def main(args):
    """CLI: python3 -m keplershm analyze RECORDING --model A --model B [--out png] [--table csv], or
    analyze RECORDING --cv [--folds K] [--candidates a,b] [--features a,b] [--floor]."""
    if args.cv:
        if args.model:
            raise InputError("--cv evaluates train's candidates on the input; compare saved --model directories "
                             "in a separate run")
        return cross_validate(args)
    if args.floor:
        raise InputError("--floor is part of the cross-validation: add --cv")
    if not args.model:
        raise InputError("nothing to analyze: give --model DIR (repeat for A/B) or --cv")
    table = load(args.input, args.csv_cpu_time_unit)
    models = [load_model(spec) for spec in args.model]
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise InputError("two models share a name (%s): name them with NAME=DIR" % ", ".join(names))
    results, predictions = compare(table, models)
    if not table.targets:
        print("note: %s has no measured power: only the models' predictions are compared" % table.source,
              file=sys.stderr)
    print(format_table(results))
    if args.table:
        write_table(results, args.table)
    plot(table, predictions, args.out)
    print("plot written to %s" % args.out)
    return 0
