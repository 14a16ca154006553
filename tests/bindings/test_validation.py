"""Blocked cross-validation (contiguous folds, reproducible), the choice among train's candidates, and
monotone constraints that hold on a grid."""
import csv
import os
import subprocess
import sys

import numpy as np
import pytest

from keplershm import dataset
from keplershm.research import train, validation
from keplershm.errors import InputError

PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)
DATA = os.path.join(os.environ.get("KEPLERSHM_DATA_DIR", ""), "kepler-model-db")
needs_data = pytest.mark.skipif(not os.path.isdir(DATA), reason="tests/data/kepler-model-db not present")


def run(*args):
    return subprocess.run([PYTHON, "-m", "keplershm", *args], capture_output=True, text=True, timeout=600)


def test_folds_are_contiguous_blocks_in_time_that_cover_every_row_once():
    time_s = np.random.default_rng(7).permutation(103).astype(float)  # rows out of time order
    folds = validation.blocked_folds(time_s, 5)
    assert len(folds) == 5
    held_out = np.concatenate([test for _, test in folds])
    assert sorted(held_out.tolist()) == list(range(103))
    for train_rows, test_rows in folds:
        block = np.sort(time_s[test_rows])
        assert np.all(np.diff(block) == 1), "a fold is one contiguous stretch of time"
        assert set(train_rows.tolist()) == set(range(103)) - set(test_rows.tolist())
    assert [len(t) for _, t in folds] == [20, 21, 20, 21, 21]
    assert time_s[folds[0][1]].max() < time_s[folds[1][1]].min(), "folds run early to late"


def test_too_few_rows_or_folds_are_refused_clearly():
    with pytest.raises(InputError, match="at least 2 folds"):
        validation.blocked_folds(np.arange(20.0), 1)
    with pytest.raises(InputError, match="9 rows are too few for 5 folds"):
        validation.blocked_folds(np.arange(9.0), 5)


def test_blocked_cv_gives_the_same_numbers_twice(recording):
    table = dataset.load(recording)
    _, first = train.evaluate_table(table, rounds=30)
    _, second = train.evaluate_table(table, rounds=30)
    for zone in ("package", "dram"):
        assert validation.fold_summary(first[zone].blocked_cv) == validation.fold_summary(second[zone].blocked_cv)
        assert first[zone].random_split == second[zone].random_split
        assert first[zone].chosen == second[zone].chosen
        assert np.array_equal(first[zone].blocked_cv.predicted, second[zone].blocked_cv.predicted)


def test_each_row_is_predicted_by_a_model_that_never_saw_its_block():
    # Power that jumps only in the last block: a model trained on the others cannot know it.
    time_s = np.arange(100.0)
    X = time_s[:, None]
    y = np.where(time_s >= 80, 100.0, 10.0)
    seen = []

    def fit_predict(X_train, y_train, X_test):
        seen.append((X_train[:, 0].tolist(), X_test[:, 0].tolist()))
        return np.full(len(X_test), y_train.mean())

    cv = validation.blocked_cv(fit_predict, X, y, time_s, 5)
    for train_times, test_times in seen:
        assert not set(train_times) & set(test_times)
    assert cv.folds[4].mae_w == pytest.approx(90.0)  # trained on 10 W only
    assert cv.worst_mae_w == cv.folds[4].mae_w and cv.mean_mae_w < cv.worst_mae_w


def test_the_floor_tells_power_the_features_do_not_carry_from_a_failure_to_generalize():
    # Power follows x everywhere, except in block 4, where a load the features do not see adds 0 or 40 W
    # at random; block 5 holds x values no other block has (a new regime, but one x explains).
    rng = np.random.default_rng(3)
    time_s = np.arange(500.0)
    x = np.where(time_s >= 400, rng.uniform(20, 30, 500), rng.uniform(0, 10, 500))
    hidden = np.where((time_s >= 300) & (time_s < 400), rng.choice([0.0, 40.0], 500), 0.0)
    X, y = x[:, None], 5 * x + hidden
    fit_predict = train.fit_predict_with(train.candidate_params(train.CANDIDATES["unconstrained"], ["x"]), 60)
    own, all_rows = validation.neighbour_cv(fit_predict, X, y, time_s, 5)
    assert (own, all_rows) == validation.neighbour_cv(fit_predict, X, y, time_s, 5), "seeded: the same twice"
    assert 15 < own[3] < 25 and 15 < all_rows[3] < 25, "about half of block 4's rows are 40 W off whatever is seen"
    for block in (0, 1, 2, 4):
        assert own[block] < 3, "x explains the other blocks once their neighbours are seen"
    assert all_rows[4] < 3, "block 5's x is its own: its neighbours in x are its neighbours in time"
    assert all([all_rows[b] > 2 * own[b] for b in (0, 1, 2)]), "block 4's rows at the same x mislead a pooled model"
    blocked = validation.blocked_cv(fit_predict, X, y, time_s, 5)
    assert blocked.folds[4].mae_w > 10 * own[4], "block 5: far above its floor, a failure to generalize"


def test_analyze_cv_with_floor_reports_it_per_fold(recording, tmp_path):
    out, table = str(tmp_path / "folds.png"), str(tmp_path / "folds.csv")
    result = run("analyze", recording, "--cv", "--floor", "--rounds", "10", "--candidates", "monotone,unconstrained",
                 "--out", out, "--table", table)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("floor per fold (neighbours seen): own block") == 2  # package and dram
    rows = list(csv.DictReader(open(table)))
    assert rows and all(float(r["floor_own_block_w"]) >= 0 and float(r["floor_all_rows_w"]) >= 0 for r in rows)
    result = run("analyze", recording, "--model", "curve", "--floor")
    assert result.returncode == 2 and "add --cv" in result.stderr


def test_unknown_candidate_is_refused(recording, tmp_path):
    result = run("train", recording, "--out", str(tmp_path / "m"), "--candidates", "monotone,forest-of-dreams")
    assert result.returncode == 2
    assert "unknown candidate(s) forest-of-dreams; there are: monotone, monotone-shallow, unconstrained, regularized" in result.stderr


def test_train_help_names_every_candidate():
    # cli.py does not import train (numpy, XGBoost) to build its parser, so the names are written there too.
    result = run("train", "--help")
    assert result.returncode == 0
    # (argparse wraps the help text, also at hyphens: compare without any whitespace)
    assert "(default" + ",".join(train.CANDIDATES) + ")" in "".join(result.stdout.split())


def _cv(maes):
    folds = [validation.Fold(i, 0.0, 0.0, 10, mae, float("nan")) for i, mae in enumerate(maes)]
    return validation.BlockedCv(folds, float(np.mean(maes)), max(maes), float("nan"), None)


def test_the_choice_is_checked_on_each_fold_it_did_not_see():
    # "late" is the better candidate only because of the last fold: without that fold, "early" wins it.
    cvs = {"early": _cv([1.0, 1.0, 1.0, 1.0, 30.0]), "late": _cv([2.0, 2.0, 2.0, 2.0, 3.0])}
    assert min(cvs, key=lambda n: cvs[n].mean_mae_w) == "late"
    assert train.choice_without_each_fold(cvs) == [("late", 2.0)] * 4 + [("early", 30.0)]
    # Another rule sees the same folds: here one that keeps "late" whatever the errors.
    assert train.choice_without_each_fold(cvs, lambda fold_maes: "late") == [("late", 2.0)] * 4 + [("late", 3.0)]
    assert train.lowest_mean({"a": [1.0, 3.0], "b": [2.0, 2.0]}) == "a", "ties: the first listed"


def _knn(X_train, y_train, X_test, k=3):
    """Interpolates well, and is flat beyond the training range (as trees are)."""
    nearest = np.argsort(np.abs(X_test[:, :1] - X_train[:, 0][None, :]), axis=1)[:, :k]
    return y_train[nearest].mean(axis=1)


def _line(X_train, y_train, X_test):
    """Misses every wiggle, and extrapolates."""
    slope, offset = np.linalg.lstsq(np.c_[X_train[:, 0], np.ones(len(X_train))], y_train, rcond=None)[0]
    return X_test[:, 0] * slope + offset


def _later_regime(n=500):
    """Load that stays within one range for 60 % of the time and then grows past it."""
    rng = np.random.default_rng(1)
    time_s = np.arange(n, dtype=float)
    x = (20 + 30 * np.clip(time_s / n - 0.6, 0, None) / 0.4) * rng.uniform(0, 1, n)
    return x[:, None], 3 * x + 4 * np.sin(2 * x) + rng.normal(0, 0.1, n), time_s


def test_forward_folds_train_on_earlier_blocks_only():
    X, y, time_s = _later_regime()
    seen = []
    validation.forward_cv(lambda X_train, y_train, X_test: seen.append((X_train[:, 0].copy(), X_test[:, 0].copy()))
                          or np.zeros(len(X_test)), X, y, time_s, 5)
    blocks = [test for _, test in validation.blocked_folds(time_s, 5)]
    assert len(seen) == 4
    for k, (trained_on, tested_on) in enumerate(seen, start=1):
        assert trained_on.tolist() == X[np.concatenate(blocks[:k]), 0].tolist()
        assert tested_on.tolist() == X[blocks[k], 0].tolist()


def test_the_rule_picks_the_model_that_extrapolates_when_a_later_regime_exists(monkeypatch):
    # Two stand-in candidates through train's own evaluation: nearest neighbours win every fold that has
    # training rows on both sides (blocked CV's mean picks them), the line wins where load goes past what
    # came before (the forward folds, and the last fifth).
    monkeypatch.setattr(train, "CANDIDATES", {"knn": train.Candidate("knn", {"kind": "knn"}, False),
                                              "line": train.Candidate("line", {"kind": "line"}, False)})
    monkeypatch.setattr(train, "fit_predict_with", lambda params, rounds: _knn if params["kind"] == "knn" else _line)
    X, y, time_s = _later_regime()
    result = train.evaluate_zone(X, y, time_s, ["x"], list(train.CANDIDATES.values()))
    assert train.RULE == "forward worst" and result.chosen == "line"
    assert result.candidates["knn"].mean_mae_w < result.candidates["line"].mean_mae_w, "blocked mean prefers knn"
    assert max(f.mae_w for f in result.forward["knn"]) > 2 * max(f.mae_w for f in result.forward["line"])
    # Nested: the last fifth is graded on the choice made from the first four, and the rule still picks the line.
    assert result.nested[-1] == ("line", result.candidates["line"].folds[-1].mae_w) and result.nested[-1][1] < 3
    old = train.nested_choice(result.candidates, result.forward, train.BLOCKED_MEAN)
    assert old[-1][0] == "knn" and old[-1][1] > 2 * result.nested[-1][1], "the old rule extrapolates badly"
    assert train.evaluate_zone(X, y, time_s, ["x"], list(train.CANDIDATES.values()), rule=train.BLOCKED_MEAN).chosen \
        == "knn"


def test_forward_rules_fall_back_to_blocked_folds_without_forward_ones():
    scores = {"a": train.Scores([1.0, 2.5], []), "b": train.Scores([2.0, 2.0], [])}
    assert train.RULES["forward worst"](scores) == "b" and train.RULES["forward mean"](scores) == "a"
    assert train.RULES["forward worst"]({"a": train.Scores([1.0], [9.0, 1.0]), "b": train.Scores([5.0], [3.0, 3.0])}) \
        == "b"


def test_monotone_constraints_cover_physical_features_only():
    assert train.monotone_constraints(["cpu_time_ms_per_s", "cpu_count", "cycles_per_s",
                                       "csv:cgroupfs_memory_usage_bytes"]) == "(1,0,1,0)"


def _grid_violations(booster, X, columns):
    """Largest drop of the prediction along each column's grid, other features held at row values."""
    worst = 0.0
    rows = X[np.random.default_rng(0).choice(len(X), 40, replace=False)]
    for j in columns:
        grid = np.linspace(X[:, j].min(), X[:, j].max() * 1.5, 60)  # past the training range too
        for row in rows:
            probe = np.repeat(row[None, :], len(grid), axis=0)
            probe[:, j] = grid
            predicted = train.predict(booster, probe)
            worst = max(worst, float(np.max(predicted[:-1] - predicted[1:])))
    return worst


@needs_data
def test_monotone_models_never_predict_less_power_for_more_work():
    table = dataset.load(os.path.join(DATA, "nx12_rapl_abs_CounterOnly.csv"))
    names = train.choose_features(table)
    X = table.X[:, [table.feature_names.index(n) for n in names]]
    y = table.targets["package"]
    for name in ("monotone", "monotone-shallow"):
        booster = train.fit(X, y, 60, train.candidate_params(train.CANDIDATES[name], names))
        assert _grid_violations(booster, X, range(len(names))) == 0.0, name
    plain = train.fit(X, y, 60, train.candidate_params(train.CANDIDATES["unconstrained"], names))
    assert _grid_violations(plain, X, range(len(names))) > 1.0, "the grid would catch a model that is not monotone"


def test_analyze_cv_shows_every_fold_and_plots_them(recording, tmp_path):
    out, table = str(tmp_path / "folds.png"), str(tmp_path / "folds.csv")
    result = run("analyze", recording, "--cv", "--rounds", "20", "--out", out, "--table", table)
    assert result.returncode == 0, result.stderr
    assert "<- chosen" in result.stdout and os.path.getsize(out) > 10000
    rows = list(csv.DictReader(open(table)))
    assert len(rows) == 2 * len(train.CANDIDATES) * 5  # zones x candidates x folds
    assert {r["fold"] for r in rows} == {"1", "2", "3", "4", "5"}
    chosen = {(r["zone"], r["candidate"]) for r in rows if r["chosen"] == "True"}
    assert {z for z, _ in chosen} == {"package", "dram"} and len(chosen) == 2
    result = run("analyze", recording, "--cv", "--model", "curve")
    assert result.returncode == 2 and "separate run" in result.stderr
    result = run("analyze", recording)
    assert result.returncode == 2 and "nothing to analyze" in result.stderr


@needs_data
def test_the_accuracy_table_command_prints_the_readme_rows():
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "models", "accuracy_table.py")
    result = subprocess.run([PYTHON, script, "--data", DATA, "--groups", "CounterOnly", "--rounds", "10"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("| feature group | zone | nested MAE per fold")
    assert [line.split(" | ")[1] for line in lines[2:]] == ["package", "dram"]
    assert "4.68 (GradientBoosting)" in lines[2]
