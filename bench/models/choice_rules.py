#!/usr/bin/python3
"""How train's choice among candidates would fare under other rules, on Kepler's nx12 data: for each
rule, each fold is predicted by the candidate the rule picks from the *other* folds' errors (as the
accuracy table's column "each fold with the choice made without it"), and the table gives the mean /
worst of those held-out folds per group and zone. The evidence behind bindings/python/README.md's
paragraph on the choice rule.

    KEPLERSHM_LIBRARY=build/lib/libkeplershm.so.1 /usr/bin/python3 bench/models/choice_rules.py

Deterministic (seeded), ~30 s. The rules were written after looking at these folds, so a rule that wins
here by a margin tuned on them has not shown that it generalizes.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))
sys.path.insert(0, HERE)

from accuracy_table import ROWS, ZONES  # noqa: E402
from keplershm.dataset import load  # noqa: E402
from keplershm.schema import np  # noqa: E402
from keplershm.train import CANDIDATES, ROUNDS, ZoneResult, choice_without_each_fold, evaluate_table, lowest_mean  # noqa: E402
from keplershm.validation import FOLDS  # noqa: E402


def lowest_worst(fold_maes):
    return min(fold_maes, key=lambda name: max(fold_maes[name]))


def lowest_mean_plus_worst(fold_maes):
    return min(fold_maes, key=lambda name: float(np.mean(fold_maes[name])) + max(fold_maes[name]))


def monotone_unless_beaten_by(margin):
    """The best monotone candidate (by mean), unless the best other one is better by more than `margin`
    (a fraction) on both the mean and the worst fold."""
    def choose(fold_maes):
        monotone = {n: v for n, v in fold_maes.items() if CANDIDATES[n].monotone}
        others = {n: v for n, v in fold_maes.items() if not CANDIDATES[n].monotone}
        if not monotone or not others:
            return lowest_mean(fold_maes)
        m, o = lowest_mean(monotone), lowest_mean(others)
        beaten = (np.mean(others[o]) < (1 - margin) * np.mean(monotone[m])
                  and max(others[o]) < (1 - margin) * max(monotone[m]))
        return o if beaten else m
    return choose


RULES = [("lowest mean (train's)", lowest_mean), ("lowest worst fold", lowest_worst),
         ("lowest mean + worst", lowest_mean_plus_worst)] + [
        ("monotone unless beaten by %d%%" % pct, monotone_unless_beaten_by(pct / 100)) for pct in (0, 10, 15, 20)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=os.path.join(HERE, "..", "..", "tests", "data", "kepler-model-db"))
    p.add_argument("--rounds", type=int, default=ROUNDS)
    p.add_argument("--folds", type=int, default=FOLDS)
    a = p.parse_args()
    columns, results = [], []
    for group, label, features in ROWS:
        _, report = evaluate_table(load(os.path.join(a.data, "nx12_rapl_abs_%s.csv" % group)), features, a.rounds, 0,
                                   a.folds)
        for zone in ZONES:
            if isinstance(report.get(zone), ZoneResult):
                columns.append("%s%s %s" % (group, " frame" if features else "", zone))
                results.append(report[zone].candidates)
    print("| rule | " + " | ".join(columns) + " |")
    print("| --- |" + " --- |" * len(columns))
    for name, rule in RULES:
        cells = []
        for cvs in results:
            maes = [mae for _, mae in choice_without_each_fold(cvs, rule)]
            cells.append("%.2f / %.2f" % (np.mean(maes), max(maes)))
        print("| %s | %s |" % (name, " | ".join(cells)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
