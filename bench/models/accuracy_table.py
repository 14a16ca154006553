#!/usr/bin/python3
"""Regenerates the accuracy table of bindings/python/README.md (and the main README's "Measured
accuracy"): keplershm train's own evaluation on Kepler's real nx12 data (tests/data/kepler-model-db), per
feature group and zone, next to Kepler's published numbers on the same data.

The headline is nested: each contiguous fold (early → late) predicted by the candidate train's rule picks
with that fold's errors left out, so no fold grades a choice it took part in; on the last fold the
scored model is trained on the first four fifths (the pick can differ from train's on them alone). Beside it, for comparison only: the random
split (what Kepler publishes), the candidate train picks from all folds with its blocked-CV mean and
worst (optimistic: the choice saw those folds), and plain unconstrained trees on the same folds.

    KEPLERSHM_LIBRARY=build/lib/libkeplershm.so.1 /usr/bin/python3 bench/models/accuracy_table.py

Options: --data DIR, --groups Basic,CounterOnly,..., --rounds N, --folds K. Deterministic (seeded): the
same data gives the same table.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python"))

from keplershm.dataset import load  # noqa: E402
from keplershm.research.train import ROUNDS, ZoneResult, evaluate_table  # noqa: E402
from keplershm.research.validation import FOLDS  # noqa: E402
from keplershm.schema import np  # noqa: E402

# Kepler's models/v0.6/nx12/README.md (rapl, AbsPower; its split is not documented), as quoted in
# tests/data/kepler-model-db/README.md. Kepler publishes package MAE only.
PUBLISHED = {"Basic": "4.07 (GradientBoosting)", "CounterOnly": "4.68 (GradientBoosting)",
             "BPFOnly": "11.63 (KNeighbors); linear 23.09", "BPFIRQ": "12.49 (GradientBoosting); linear 21.99"}
# (group, label, features, csv_columns): train's defaults per CSV, and Basic with its CSV-only columns
# (--csv-columns: cgroupfs, kubelet), a model kepler-estimate refuses on a node, for comparison.
ROWS = [("Basic", "¹", None, False), ("Basic", ", with CSV-only columns²", None, True),
        ("CounterOnly", "", None, False), ("BPFOnly", "", None, False), ("BPFIRQ", "", None, False)]
ZONES = ("package", "dram")


def bench_arguments(doc, rounds=ROUNDS):
    """The options every script here shares (--data, --rounds, --folds), parsed; `doc`'s first paragraph
    is the description."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data",
                                                  "kepler-model-db"))
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--folds", type=int, default=FOLDS)
    return p.parse_args()


def load_group(data, group):
    return load(os.path.join(data, "nx12_rapl_abs_%s.csv" % group))


def evaluate_row(data, row, rounds, folds):
    group, _, features, csv_columns = row
    return evaluate_table(load_group(data, group), features, rounds, 0, folds, csv_columns=csv_columns)[1]


def folds_text(maes):
    return " / ".join("%.2f" % mae for mae in maes)


def nested_text(r):
    """The nested MAE per fold, naming the candidate where it differs from the one chosen on all folds."""
    return " / ".join("%.2f" % mae + ("" if name == r.chosen else " [%s]" % name) for name, mae in r.nested)


def table_rows(data, groups, rounds, folds):
    for row in ROWS:
        group, label = row[0], row[1]
        if group not in groups:
            continue
        report = evaluate_row(data, row, rounds, folds)
        for zone in ZONES:
            r = report.get(zone)
            if not isinstance(r, ZoneResult):
                continue
            nested = [mae for _, mae in r.nested]
            plain = r.candidates["unconstrained"]
            yield ("| %s | %s | %s | **%.2f** | **%.2f** | %s | %.2f | %s: %.2f / %.2f | %.2f / %.2f |" % (
                group + label, zone, nested_text(r), np.mean(nested), max(nested),
                PUBLISHED.get(group, "—") if zone == "package" else "—", r.random_split[0], r.chosen,
                r.blocked_cv.mean_mae_w, r.blocked_cv.worst_mae_w, plain.mean_mae_w, plain.worst_mae_w))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=os.path.join(here, "..", "..", "tests", "data", "kepler-model-db"))
    p.add_argument("--groups", default=",".join(dict.fromkeys(row[0] for row in ROWS)))
    p.add_argument("--rounds", type=int, default=ROUNDS)
    p.add_argument("--folds", type=int, default=FOLDS)
    a = p.parse_args()
    print("| feature group | zone | nested MAE per fold, early → late (W) | nested mean | nested worst |"
          " Kepler's published MAE (random split) | our random split | chosen on all folds: blocked-CV mean / worst"
          " (optimistic) | plain trees, blocked-CV mean / worst |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for line in table_rows(a.data, a.groups.split(","), a.rounds, a.folds):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
