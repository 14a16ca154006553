"""What a tree model does beyond the load it was trained on, and slopes that could carry it there.

Trees are flat outside their training range: every split threshold lies between training values, so a
row with more of some feature than any training row is predicted as if it had the most seen. A model
carries, per feature, the range it was trained on (``training_range``: kepler-estimate says when a frame
leaves it, ``kepler_model_extrapolating``) and, optionally, per zone, a watts-per-unit slope for each
physical feature (``extrapolation``): the excess of a feature over its range times the slope is added to
the trees' prediction (a shortfall under the range subtracts), so the prediction keeps rising with load
the model has not met.

The slopes are a non-negative least-squares fit of the zone's power on the physical features over the
training rows (power never falls when one of them rises; a negative slope from collinear counters would
make more load cost less). ``train`` writes them only when asked (``--extrapolation-slopes``): on
Kepler's nx12 data they made the rows beyond the range worse more often than better
(bench/models/extrapolation.py; bindings/python/README.md, "Beyond the training range").
"""
from .schema import np

# Lawson-Hanson stops after this many passes; each adds one feature to the passive set, so it converges
# far sooner with the at most 256 features of a model.
MAX_PASSES = 3 * 256


def training_range(X, names):
    """{feature: [lowest, highest]} over the finite values of each column of `X` (a feature with none is
    left out: the model cannot say where it was trained on it)."""
    ranges = {}
    seen = X.astype(np.float32).astype(np.float64)  # the values the boosters see, so the edge row is inside
    for i, name in enumerate(names):
        column = seen[:, i][np.isfinite(seen[:, i])]
        if len(column):
            ranges[name] = [float(column.min()), float(column.max())]
    return ranges


def nnls(A, b, tolerance=1e-10):
    """argmin ||A x - b|| subject to x >= 0 (Lawson and Hanson, 1974): x grows a passive set one
    coordinate at a time, the one whose gradient most wants to rise, and steps back along the segment
    whenever an unconstrained solution on that set leaves the feasible region."""
    n = A.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    gradient = A.T @ (b - A @ x)
    for _ in range(MAX_PASSES):
        if passive.all() or not (gradient[~passive] > tolerance).any():
            break
        candidates = np.where(~passive, gradient, -np.inf)
        passive[int(np.argmax(candidates))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(A[:, passive], b, rcond=None)[0]
            if (z[passive] > tolerance).all():
                break
            blocking = passive & (z <= tolerance)
            step = np.min(x[blocking] / np.maximum(x[blocking] - z[blocking], 1e-300))
            x = x + step * (z - x)
            passive &= x > tolerance
            x[~passive] = 0.0
        x = z
        gradient = A.T @ (b - A @ x)
    return x


def excess_slopes(X, y, names, physical):
    """{feature: watts per unit >= 0} for the features among `names` that `physical` (a list of bools,
    parallel to names) marks, from a non-negative least-squares fit of `y` on those columns over the
    finite rows, centred (the intercept is free) and scaled (so the tolerance means the same for cycles
    and for milliseconds). Features with a zero slope are left out."""
    columns = [i for i, p in enumerate(physical) if p]
    if not columns:
        return {}
    A = X[:, columns].astype(np.float64)
    rows = np.isfinite(A).all(axis=1) & np.isfinite(y)
    A, b = A[rows], y[rows].astype(np.float64)
    if len(b) < 2:
        return {}
    scale = A.std(axis=0)
    scale[scale == 0] = 1.0
    slopes = nnls((A - A.mean(axis=0)) / scale, b - b.mean()) / scale
    return {names[i]: float(s) for i, s in zip(columns, slopes) if s > 0}


def excess(X, names, ranges):
    """Per row and feature, how far the value lies outside its training range (negative below it, 0
    inside it or where the feature has no range)."""
    out = np.zeros(X.shape, dtype=np.float64)
    for i, name in enumerate(names):
        if name in ranges:
            lo, hi = ranges[name]
            column = X[:, i].astype(np.float64)
            out[:, i] = column - np.clip(column, lo, hi)
    return np.nan_to_num(out, nan=0.0)


def extrapolating(X, names, ranges):
    """Per row: whether any feature lies outside its training range."""
    return (excess(X, names, ranges) != 0).any(axis=1)


def excess_watts(X, names, ranges, slopes):
    """Per row: the watts the slopes add for the excess beyond the training range (negative below it)."""
    e = excess(X, names, ranges)
    return sum((e[:, names.index(f)] * s for f, s in slopes.items() if f in names), np.zeros(len(X)))
