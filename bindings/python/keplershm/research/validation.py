"""How a model's error is measured: blocked time-series cross-validation, and a random split beside it.

A model in service meets workloads it was not trained on. A random split hides that (every test row
has neighbours in time among the training rows, 3 s away on Kepler's data), so the headline is blocked
cross-validation: the rows in time order are cut into k contiguous blocks, and each block is predicted
by a model trained on all the others, as a user meets a model trained before (the last block), after
(the first) or around (a middle one) a new workload. Reported per fold, as mean and as worst fold.

Beside it, neighbour_cv() asks how well each block can be predicted at all: by models that saw the
neighbours of its rows (3 s away on Kepler's data). Where even that is far off, the block's power is not
in the features, and no model of them should be expected to do better on unseen time.

Everything here is seeded and deterministic: the same rows give the same numbers twice.
"""
from collections import namedtuple

from ..errors import InputError
from ..schema import np

FOLDS = 5
RANDOM_TRAIN_FRACTION = 0.8
MIN_FOLD_ROWS = 2  # fewer rows per block cannot say anything about a block
NEIGHBOUR_PARTS = 5

Fold = namedtuple("Fold", "index start_s end_s rows mae_w mape_pct")
Fold.__doc__ = "One held-out block: its time range (interval ends, s), rows and the model's error on it."

BlockedCv = namedtuple("BlockedCv", "folds mean_mae_w worst_mae_w mean_mape_pct predicted")
BlockedCv.__doc__ = """Blocked cross-validation of one zone. predicted: each row's out-of-fold prediction
(by the model that did not see its block), in the rows' original order."""


def errors(actual, predicted):
    """(MAE in W, MAPE in %): MAPE over rows whose measured power is above 0.5 W (no division by ~0)."""
    mae = float(np.mean(np.abs(predicted - actual)))
    keep = np.abs(actual) > 0.5
    mape = float(np.mean(np.abs((predicted[keep] - actual[keep]) / actual[keep])) * 100) if keep.any() else float("nan")
    return mae, mape


def blocked_folds(time_s, folds=FOLDS):
    """[(train rows, test rows)]: the rows in time order cut into `folds` contiguous blocks."""
    n = len(time_s)
    if folds < 2:
        raise InputError("blocked cross-validation needs at least 2 folds (got %d)" % folds)
    if n < folds * MIN_FOLD_ROWS:
        raise InputError("%d rows are too few for %d folds (at least %d rows per fold)" % (n, folds, MIN_FOLD_ROWS))
    by_time = np.argsort(time_s, kind="stable")
    bounds = [n * i // folds for i in range(folds + 1)]
    return [(np.concatenate([by_time[:lo], by_time[hi:]]), by_time[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]


def blocked_cv(fit_predict, X, y, time_s, folds=FOLDS):
    """Blocked CV of `fit_predict(X_train, y_train, X_test) -> predictions` on one zone's rows."""
    predicted = np.full(len(y), np.nan)
    results = []
    for index, (train, test) in enumerate(blocked_folds(time_s, folds)):
        predicted[test] = fit_predict(X[train], y[train], X[test])
        mae, mape = errors(y[test], predicted[test])
        results.append(Fold(index, float(time_s[test].min()), float(time_s[test].max()), int(len(test)), mae, mape))
    maes = [f.mae_w for f in results]
    mapes = [f.mape_pct for f in results if f.mape_pct == f.mape_pct]
    return BlockedCv(results, float(np.mean(maes)), float(max(maes)),
                     float(np.mean(mapes)) if mapes else float("nan"), predicted)


def forward_cv(fit_predict, X, y, time_s, folds=FOLDS):
    """[Fold] of forward chaining over blocked_folds()' blocks: block k (k = 1 .. folds-1) predicted by a
    model trained on blocks 0 .. k-1 only. Unlike blocked CV, no fold is predicted with the help of rows
    after it, so a candidate is graded on what it makes of load it has not reached yet, the regime change
    that a model in service meets (and blocked CV's middle folds never ask about)."""
    blocks = [test for _, test in blocked_folds(time_s, folds)]
    results = []
    for index in range(1, len(blocks)):
        train, test = np.concatenate(blocks[:index]), blocks[index]
        mae, mape = errors(y[test], fit_predict(X[train], y[train], X[test]))
        results.append(Fold(index, float(time_s[test].min()), float(time_s[test].max()), int(len(test)), mae, mape))
    return results


def random_split(fit_predict, X, y, seed=0, fraction=RANDOM_TRAIN_FRACTION):
    """(MAE, MAPE) of a seeded random `fraction`/rest split: what most published model tables report."""
    n = len(y)
    shuffled = np.random.default_rng(seed).permutation(n)
    cut = int(n * fraction)
    train, test = shuffled[:cut], shuffled[cut:]
    return errors(y[test], fit_predict(X[train], y[train], X[test]))


def _part_predictions(fit_predict, X, y, rows, parts):
    """Predictions for `rows` (NaN elsewhere): `rows` in a seeded random order cut into `parts`, each part
    predicted by a model trained on the others."""
    pieces = [p for p in np.array_split(rows[np.random.default_rng(0).permutation(len(rows))], min(parts, len(rows)))
              if len(p)]
    predicted = np.full(len(y), np.nan)
    for i, test in enumerate(pieces):
        rest = np.concatenate(pieces[:i] + pieces[i + 1:])
        predicted[test] = fit_predict(X[rest], y[rest], X[test])
    return predicted


def neighbour_cv(fit_predict, X, y, time_s, folds=FOLDS, parts=NEIGHBOUR_PARTS):
    """([MAE per block], [MAE per block]) over blocked_folds()' blocks, each row predicted by a model that
    saw its neighbours in time: random `parts`-part CV within the block alone (the first list: the block's
    own regime and nothing else), and over all rows with the errors grouped by block (the second: every
    block, the row's own block included). Both are easier than blocked CV, which sees nothing of the block."""
    blocks = [test for _, test in blocked_folds(time_s, folds)]
    everywhere = _part_predictions(fit_predict, X, y, np.arange(len(y)), parts)
    own = [errors(y[b], _part_predictions(fit_predict, X, y, b, parts)[b])[0] for b in blocks]
    return own, [errors(y[b], everywhere[b])[0] for b in blocks]


def rounded(value, digits):
    """`value` rounded for JSON; None for NaN (JSON has no NaN, and kepler-estimate parses strict JSON)."""
    return None if value != value else round(float(value), digits)


def fold_summary(cv):
    """The JSON form of a BlockedCv (model.json's training section)."""
    return {"folds": [{"start_s": f.start_s, "end_s": f.end_s, "rows": f.rows, "mae_w": rounded(f.mae_w, 4),
                       "mape_pct": rounded(f.mape_pct, 3)} for f in cv.folds],
            "mean_mae_w": rounded(cv.mean_mae_w, 4), "worst_mae_w": rounded(cv.worst_mae_w, 4),
            "mean_mape_pct": rounded(cv.mean_mape_pct, 3)}
