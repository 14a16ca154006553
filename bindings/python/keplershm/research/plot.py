"""Plots of estimates CSVs (written by ``kepler-estimate --replay REC --csv FILE``): power over time.

Two row forms are read (one row per interval × level × id × zone [× mode] × model):

* kepler-estimate's: ``sequence, interval_start_ns, interval_end_ns, level, id, name, namespace, zone,
  package, dynamic_joules, idle_joules, model`` (watts = (dynamic + idle joules) / interval);
* the long form: ``interval_end_ns, level, id, name, zone, mode, joules, watts, model``.

``level`` is node, container, pod, namespace, vm or process; a workload's power is the sum of its rows
over zones, sockets and modes. kepler-estimate writes its primary model only, so several CSVs (one
replay per ``--primary``) can be given and are plotted together. Node rows of the model named by
``--measured`` (default: a model called measured, rapl, hwmon, acpi, redfish or pmbus) are measured power; with
them a model-vs-measured panel is drawn. Headless (matplotlib Agg). The CSV is untrusted: a missing
column or a bad number is reported with its row.
"""
import csv
from collections import defaultdict

from ..errors import InputError
from ..schema import np

COMMON = ("interval_end_ns", "level", "id", "name", "zone", "model")
LONG_FORM = ("watts",)
ESTIMATOR_FORM = ("interval_start_ns", "dynamic_joules", "idle_joules")
MEASURED_MODELS = {"measured", "rapl", "hwmon", "acpi", "redfish", "pmbus"}
MAX_ROWS = 20_000_000


def _watts(r, path, row):
    """Watts of one row in either form."""
    if "watts" in r and r["watts"] not in (None, ""):
        return float(r["watts"])
    start, end = int(r["interval_start_ns"]), int(r["interval_end_ns"])
    if end <= start:
        raise InputError("%s: row %d: empty or reversed interval" % (path, row))
    return (float(r["dynamic_joules"]) + float(r["idle_joules"])) / ((end - start) / 1e9)


def read_estimates(path):
    """Rows of an estimates CSV as dicts with float ``t`` (seconds), ``watts``, level, id, name, zone, model."""
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise InputError("%s: cannot open: %s" % (path, e.strerror)) from None
    rows = []
    with f:
        try:
            reader = csv.DictReader(f)
            fields = reader.fieldnames or []
            missing = [c for c in COMMON if c not in fields]
            if not missing and not all(c in fields for c in LONG_FORM) and not all(c in fields for c in ESTIMATOR_FORM):
                missing = ["watts (or interval_start_ns, dynamic_joules, idle_joules)"]
            if missing:
                raise InputError("%s: not an estimates CSV: missing column(s) %s (has: %s)" % (
                    path, ", ".join(missing), ", ".join(fields) or "nothing"))
            for i, r in enumerate(reader, start=2):
                if i > MAX_ROWS:
                    raise InputError("%s: more than %d rows" % (path, MAX_ROWS))
                try:
                    t = int(r["interval_end_ns"]) / 1e9
                    watts = _watts(r, path, i)
                except (TypeError, ValueError):
                    raise InputError("%s: row %d: a time or energy field is not a number (%s)" % (
                        path, i, ", ".join("%s=%r" % (k, r.get(k)) for k in ("interval_end_ns", "watts",
                                                                              "dynamic_joules", "idle_joules")
                                           if k in r))) from None
                if not np.isfinite(watts):
                    raise InputError("%s: row %d: watts %r is not finite" % (path, i, watts))
                rows.append({"t": t, "level": r["level"], "id": r["id"], "name": r["name"] or r["id"],
                             "zone": r["zone"], "model": r["model"], "watts": watts})
        except UnicodeDecodeError as e:
            raise InputError("%s: not UTF-8 text (%s)" % (path, e)) from None
        except csv.Error as e:
            raise InputError("%s: malformed CSV: %s" % (path, e)) from None
    if not rows:
        raise InputError("%s: no estimate rows" % path)
    return rows


def series(rows, key):
    """{key(row): (times, watts)} summing rows that share the key and interval."""
    acc = defaultdict(lambda: defaultdict(float))
    for r in rows:
        acc[key(r)][r["t"]] += r["watts"]
    out = {}
    for k, by_t in acc.items():
        ts = sorted(by_t)
        out[k] = (np.array(ts), np.array([by_t[t] for t in ts]))
    return out


def _primary_model(rows, measured):
    """The model most workload rows come from (estimates of one model per workload panel)."""
    counts = defaultdict(int)
    for r in rows:
        if r["model"] not in measured:
            counts[r["model"]] += 1
    return max(counts, key=counts.get) if counts else None


def _top(rows, level, n, model):
    picked = [r for r in rows if r["level"] == level and (model is None or r["model"] == model)]
    per = series(picked, lambda r: (r["id"], r["name"]))
    ranked = sorted(per.items(), key=lambda kv: -float(np.trapz(kv[1][1], kv[1][0])) if len(kv[1][0]) > 1
                    else -float(kv[1][1].sum()))
    return ranked[:n], len(per)


def plot_estimates(rows, out, top=8, measured=None):
    """Writes the PNG; returns the list of panel titles drawn. `measured`: model names that are meters."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = set(measured or MEASURED_MODELS)
    t0 = min(r["t"] for r in rows)
    node = [r for r in rows if r["level"] == "node"]
    has_measured = any(r["model"] in measured for r in node)
    workload_model = _primary_model([r for r in rows if r["level"] != "node"], measured)
    workload_level = next((lv for lv in ("container", "pod", "vm", "namespace") if any(r["level"] == lv for r in rows)),
                          None)
    panels = []
    if node:
        panels.append(("node", "node power per model" + (" vs measured" if has_measured else "")))
    if workload_level:
        panels.append((workload_level, "top %ss (%s)" % (workload_level, workload_model)))
    if any(r["level"] == "process" for r in rows):
        panels.append(("process", "top processes (%s)" % workload_model))
    if not panels:
        raise InputError("no node, container, pod, vm or process rows to plot")
    fig, axes = plt.subplots(len(panels), 1, figsize=(13, 3.8 * len(panels)), squeeze=False)
    drawn = []
    for ax, (level, title) in zip(axes[:, 0], panels):
        if level == "node":
            for model, (t, w) in sorted(series(node, lambda r: r["model"]).items()):
                meter = model in measured
                ax.plot(t - t0, w, color="black" if meter else None, linewidth=1.6 if meter else 1.0,
                        zorder=5 if meter else 2, label="%s (measured)" % model if meter else model)
        else:
            shown, total = _top(rows, level, top, workload_model)
            for (wid, name), (t, w) in shown:
                ax.plot(t - t0, w, linewidth=1.0, label=(name or wid)[:40])
            if total > len(shown):
                title += ", %d of %d shown" % (len(shown), total)
        ax.set_title(title)
        drawn.append(title)
        ax.set_xlabel("s since first interval")
        ax.set_ylabel("W (all zones)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return drawn


def main(args):
    """CLI: python3 -m keplershm plot ESTIMATES.csv [MORE.csv ...] --out power.png [--top N] [--measured NAME]."""
    rows = [r for path in args.estimates for r in read_estimates(path)]
    panels = plot_estimates(rows, args.out, args.top, args.measured)
    print("%s written: %s" % (args.out, "; ".join(panels)))
    return 0
