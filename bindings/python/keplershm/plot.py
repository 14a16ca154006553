"""Plots of an estimates CSV (written by ``kepler-estimate --replay``): power over time.

Expected columns (one row per interval × level × id × zone × mode × model):
``interval_end_ns, level, id, name, zone, mode, joules, watts, model``. ``level`` is node, container,
pod, vm or process; a workload's power is the sum of its rows over zones and modes. Node rows whose
``model`` is ``measured`` (or a meter name: rapl, hwmon, acpi, meter) are measured power; with them a
model-vs-measured panel is drawn. Headless (matplotlib Agg). The CSV is untrusted: a missing column or
a bad number is reported with its row.
"""
import csv
from collections import defaultdict

from .errors import InputError
from .schema import np

REQUIRED = ("interval_end_ns", "level", "id", "name", "zone", "mode", "watts", "model")
MEASURED_MODELS = {"measured", "rapl", "hwmon", "acpi", "meter"}
MAX_ROWS = 20_000_000


def read_estimates(path):
    """Rows of an estimates CSV as dicts with float ``t`` (seconds) and ``watts``."""
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise InputError("%s: cannot open: %s" % (path, e.strerror)) from None
    rows = []
    with f:
        try:
            reader = csv.DictReader(f)
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
            if missing:
                raise InputError("%s: not an estimates CSV: missing column(s) %s (has: %s)" % (
                    path, ", ".join(missing), ", ".join(reader.fieldnames or []) or "nothing"))
            for i, r in enumerate(reader, start=2):
                if i > MAX_ROWS:
                    raise InputError("%s: more than %d rows" % (path, MAX_ROWS))
                try:
                    t = int(r["interval_end_ns"]) / 1e9
                    watts = float(r["watts"])
                except (TypeError, ValueError):
                    raise InputError("%s: row %d: interval_end_ns %r or watts %r is not a number" % (
                        path, i, r.get("interval_end_ns"), r.get("watts"))) from None
                if not np.isfinite(watts):
                    raise InputError("%s: row %d: watts %r is not finite" % (path, i, r["watts"]))
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


def _primary_model(rows):
    """The model most workload rows come from (estimates of one model per workload panel)."""
    counts = defaultdict(int)
    for r in rows:
        if r["model"] not in MEASURED_MODELS:
            counts[r["model"]] += 1
    return max(counts, key=counts.get) if counts else None


def _top(rows, level, n, model):
    picked = [r for r in rows if r["level"] == level and (model is None or r["model"] == model)]
    per = series(picked, lambda r: (r["id"], r["name"]))
    ranked = sorted(per.items(), key=lambda kv: -float(np.trapz(kv[1][1], kv[1][0])) if len(kv[1][0]) > 1
                    else -float(kv[1][1].sum()))
    return ranked[:n], len(per)


def plot_estimates(rows, out, top=8):
    """Writes the PNG; returns the list of panel titles drawn."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = min(r["t"] for r in rows)
    node = [r for r in rows if r["level"] == "node"]
    has_measured = any(r["model"] in MEASURED_MODELS for r in node)
    workload_model = _primary_model([r for r in rows if r["level"] != "node"])
    workload_level = next((lv for lv in ("container", "pod", "vm") if any(r["level"] == lv for r in rows)), None)
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
                measured = model in MEASURED_MODELS
                ax.plot(t - t0, w, color="black" if measured else None, linewidth=1.6 if measured else 1.0,
                        label="%s (measured)" % model if measured else model)
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
    """CLI: python3 -m keplershm plot ESTIMATES.csv --out power.png [--top N]."""
    rows = read_estimates(args.estimates)
    panels = plot_estimates(rows, args.out, args.top)
    print("%s written: %s" % (args.out, "; ".join(panels)))
    return 0
