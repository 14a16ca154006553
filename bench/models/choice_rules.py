#!/usr/bin/python3
"""How train's choice among candidates fares under each rule of keplershm.research.train.RULES, on
Kepler's nx12 data, measured nested: each blocked fold is predicted by the candidate the rule picks with
that fold's errors left out (blocked and forward-chained alike), as the accuracy table's headline. Per
group and zone, mean / worst of those held-out folds; the worst is the last fifth wherever regime
change bites. The evidence behind train's RULE (bindings/python/README.md).

    KEPLERSHM_LIBRARY=build/lib/libkeplershm.so.1 /usr/bin/python3 bench/models/choice_rules.py

Deterministic (seeded), ~1 min on one core. The rules were compared on these folds, so a rule that wins
here by little has not shown that it generalizes; one that wins by a lot on the last fifth has.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))
sys.path.insert(0, HERE)

from accuracy_table import ROWS, ZONES, bench_arguments, evaluate_row  # noqa: E402
from keplershm.research import train  # noqa: E402
from keplershm.schema import np  # noqa: E402


def main():
    a = bench_arguments(__doc__)
    columns, results = [], []
    for row in ROWS:
        report = evaluate_row(a.data, row, a.rounds, a.folds)
        for zone in ZONES:
            if isinstance(report.get(zone), train.ZoneResult):
                columns.append("%s%s %s" % (row[0], " CSV columns" if row[3] else "", zone))
                results.append(report[zone])
    print("| rule | " + " | ".join(columns) + " |")
    print("| --- |" + " --- |" * len(columns))
    for name in train.RULES:
        cells = []
        for r in results:
            maes = [mae for _, mae in train.nested_choice(r.candidates, r.forward, name)]
            cells.append("%.2f / %.2f" % (np.mean(maes), max(maes)))
        print("| %s%s | %s |" % (name, " (train's)" if name == train.RULE else "", " | ".join(cells)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
