"""Training XGBoost node power models that kepler-estimate serves.

One booster per measured zone (package, dram, ...), over node features per MODELS.md. A model in
service meets workloads it never saw, so the error that matters is on held-out *time*: each zone is
evaluated by blocked cross-validation (:mod:`keplershm.research.validation`: k contiguous folds, per fold, mean
and worst), with a seeded random split beside it (what most published tables report).

Trees fit their training range and nothing else; what keeps them honest outside it is physics. Four
candidate boosters are evaluated by the same folds and the one with the lowest mean fold error is kept
for each zone:

* ``monotone``: power never falls when a physical feature (CPU time, cycles, instructions, misses,
  page-cache hits, softirqs) rises — XGBoost's monotone constraints;
* ``monotone-shallow``: the same with depth-3 trees (smoother, fewer feature interactions);
* ``unconstrained``: plain trees (where a feature's relation to power is genuinely not monotone on the
  training data, e.g. CPU time alone across workload kinds, constraints cost more than they give).
* ``regularized``: plain trees held back — depth 4, leaf values shrunk (L2 ``lambda`` 10) and a split kept
  only when it gains at least ``gamma`` 5 — so a leaf cannot follow a few rows of one workload (on
  Kepler's data it wins, by a little, where CPU time is the main feature and CounterOnly's DRAM).

All of them are plain squared-error XGBoost boosters: kepler-estimate serves any of them through the C
API with the same parity as before. The chosen one is trained on all rows; its mean fold error goes into
the metadata as ``expected_error_w`` (exported by kepler-estimate as ``kepler_model_expected_error_watts``),
and the metadata keeps every fold, the random split and every candidate's errors. The choice is made on
the same folds that report its error; choice_without_each_fold() measures what that hides, and on
Kepler's data it is not small (bindings/python/README.md).
"""
import datetime
import json
import os
import sys
from collections import OrderedDict, namedtuple

from ..dataset import load
from ..errors import InputError
from ..features import FEATURES
from ..model import FORMAT, _xgboost, feature_units, select_columns
from ..schema import np
from .validation import FOLDS, RANDOM_TRAIN_FRACTION, blocked_cv, fold_summary, neighbour_cv, random_split, rounded

MIN_ROWS = 10
PARAMS = {"objective": "reg:squarederror", "max_depth": 6, "eta": 0.1, "min_child_weight": 1, "subsample": 1.0,
          "nthread": 2, "seed": 0}
ROUNDS = 200

Candidate = namedtuple("Candidate", "name params monotone")
CANDIDATES = OrderedDict((c.name, c) for c in [
    Candidate("monotone", {"max_depth": 6}, True),
    Candidate("monotone-shallow", {"max_depth": 3}, True),
    Candidate("unconstrained", {"max_depth": 6}, False),
    Candidate("regularized", {"max_depth": 4, "lambda": 10, "gamma": 5}, False),
])

ZoneResult = namedtuple("ZoneResult", "rows chosen blocked_cv random_split candidates params floor")
ZoneResult.__doc__ = """One zone's evaluation: the chosen candidate's BlockedCv and (MAE, MAPE) random
split, every candidate's BlockedCv by name, the XGBoost parameters of the chosen one, and (when asked
for, else None) the Floor under each fold."""

Floor = namedtuple("Floor", "own_block all_rows")
Floor.__doc__ = """Per fold, how well its rows can be predicted by models that saw their neighbours in time
(validation.neighbour_cv), the lowest MAE of the candidates: trained on the fold's own other rows, and on
all other rows. A fold far above its floor is a failure to generalize; a high floor, power the features
do not carry."""


def choose_features(table, wanted=None):
    """Feature names to train on: `wanted` (all must be available), else every available one."""
    if wanted:
        unknown = [n for n in wanted if n not in table.feature_names]
        if unknown:
            raise InputError("%s has no feature(s) %s; it has: %s" % (table.source, ", ".join(unknown),
                                                                     ", ".join(table.feature_names)))
        unavailable = [n for n in wanted if n in table.unavailable]
        if unavailable:
            raise InputError("feature(s) unavailable in %s: %s" % (table.source, "; ".join(
                "%s (%s)" % (n, table.unavailable[n]) for n in unavailable)))
        return list(wanted)
    return [n for n in table.feature_names if n not in table.unavailable]


def choose_candidates(wanted=None):
    """Candidates by name (`wanted`: a list of names; default every one)."""
    if not wanted:
        return list(CANDIDATES.values())
    unknown = [n for n in wanted if n not in CANDIDATES]
    if unknown:
        raise InputError("unknown candidate(s) %s; there are: %s" % (", ".join(unknown), ", ".join(CANDIDATES)))
    return [CANDIDATES[n] for n in wanted]


def monotone_constraints(names):
    """XGBoost's constraint string: +1 for physical features (more of any never lowers power), 0 for the
    CPU count and for CSV-only columns (memory sizes, kubelet figures: no such law)."""
    signs = [1 if n in FEATURES and FEATURES[n].metric != 0 else 0 for n in names]
    return "(%s)" % ",".join(str(s) for s in signs)


def candidate_params(candidate, names):
    """The XGBoost parameters a candidate trains with on these feature columns."""
    params = dict(PARAMS, **candidate.params)
    if candidate.monotone:
        params["monotone_constraints"] = monotone_constraints(names)
    return params


def fit(X, y, rounds=ROUNDS, params=None):
    xgboost = _xgboost()
    matrix = xgboost.DMatrix(X.astype(np.float32), label=y.astype(np.float32), missing=np.nan)
    return xgboost.train(dict(PARAMS, **(params or {})), matrix, num_boost_round=rounds)


def predict(booster, X):
    xgboost = _xgboost()
    return np.maximum(booster.predict(xgboost.DMatrix(X.astype(np.float32), missing=np.nan)).astype(np.float64), 0.0)


def fit_predict_with(params, rounds):
    """fit_predict(X_train, y_train, X_test) for the validation functions."""
    return lambda X_train, y_train, X_test: predict(fit(X_train, y_train, rounds, params), X_test)


def neighbour_floor(X, y, time_s, names, candidates, rounds=ROUNDS, folds=FOLDS):
    """The Floor under each fold of one zone's rows: per fold and setting, the lowest candidate's MAE."""
    own, all_rows = zip(*(neighbour_cv(fit_predict_with(candidate_params(c, names), rounds), X, y, time_s, folds)
                          for c in candidates))
    return Floor([float(v) for v in np.min(own, axis=0)], [float(v) for v in np.min(all_rows, axis=0)])


def evaluate_zone(X, y, time_s, names, candidates, rounds=ROUNDS, folds=FOLDS, seed=0, floor=False):
    """Blocked CV of every candidate on one zone's rows, the choice, the chosen one's random split, and
    with `floor` the Floor under each fold (about three times the work of the rest)."""
    cvs = OrderedDict((c.name, blocked_cv(fit_predict_with(candidate_params(c, names), rounds), X, y, time_s, folds))
                      for c in candidates)
    chosen = lowest_mean({name: [f.mae_w for f in cv.folds] for name, cv in cvs.items()})
    params = candidate_params(CANDIDATES[chosen], names)
    split = random_split(fit_predict_with(params, rounds), X, y, seed)
    under = neighbour_floor(X, y, time_s, names, candidates, rounds, folds) if floor else None
    return ZoneResult(len(y), chosen, cvs[chosen], split, cvs, params, under)


def lowest_mean(fold_maes):
    """train's choice: the candidate with the lowest mean fold MAE (ties: the first listed), from
    {candidate: [MAE per fold]}."""
    return min(fold_maes, key=lambda name: float(np.mean(fold_maes[name])))


def choice_without_each_fold(cvs, choose=lowest_mean):
    """[(candidate, its MAE on the fold)] per fold: the candidate `choose` (train's rule by default) picks
    from the *other* folds' errors, and how it does on the fold it did not look at. The chosen candidate's
    own folds are optimistic, since the choice saw them; these are not, on that count."""
    fold_count = len(next(iter(cvs.values())).folds)
    picks = []
    for held_out in range(fold_count):
        elsewhere = {name: [f.mae_w for f in cv.folds if f.index != held_out] for name, cv in cvs.items()}
        name = choose(elsewhere)
        picks.append((name, cvs[name].folds[held_out].mae_w))
    return picks


def evaluate_table(table, features=None, rounds=ROUNDS, seed=0, folds=FOLDS, candidates=None, floor=False):
    """(feature names, {zone: ZoneResult, or {"skipped": reason}}) for every zone with measured power in
    `table`. Raises InputError when no feature is available or no zone has enough measured rows."""
    names = choose_features(table, features)
    if not names:
        raise InputError("%s: no feature is available to train on (%s)" % (
            table.source, "; ".join("%s: %s" % kv for kv in table.unavailable.items())))
    chosen_candidates = choose_candidates(candidates)
    X_all = select_columns(table, names, "being trained")
    need = max(MIN_ROWS, 2 * folds)
    report = {}
    for zone, y_all in table.targets.items():
        rows = ~np.isnan(y_all)
        if rows.sum() < need:
            report[zone] = {"skipped": "only %d rows with measured %s power (at least %d needed)" %
                                       (int(rows.sum()), zone, need)}
            continue
        report[zone] = evaluate_zone(X_all[rows], y_all[rows], table.time_s[rows], names, chosen_candidates, rounds,
                                     folds, seed, floor)
    if not any(isinstance(r, ZoneResult) for r in report.values()):
        raise InputError("%s has no measured power with enough rows to train on: %s" % (
            table.source, "; ".join("%s: %s" % (z, r["skipped"]) for z, r in report.items()) or "no energy zones"))
    return names, report


def train_table(table, features=None, rounds=ROUNDS, seed=0, folds=FOLDS, candidates=None):
    """Evaluates (evaluate_table()) and trains the chosen booster of each zone on all its rows. Returns
    (features, {zone: booster}, report)."""
    names, report = evaluate_table(table, features, rounds, seed, folds, candidates)
    X_all = select_columns(table, names, "being trained")
    boosters = {}
    for zone, result in report.items():
        if isinstance(result, ZoneResult):
            rows = ~np.isnan(table.targets[zone])
            boosters[zone] = fit(X_all[rows], table.targets[zone][rows], rounds, result.params)
    return names, boosters, report


def training_summary(report, rounds, folds):
    """model.json's record of how each zone was evaluated and chosen."""
    trained = {z: r for z, r in report.items() if isinstance(r, ZoneResult)}
    return {
        "evaluation": "blocked cross-validation: %d contiguous folds in time, each predicted by a model trained on "
                      "the others (the headline); random: seeded %d/%d split" % (
                          folds, RANDOM_TRAIN_FRACTION * 100, 100 - RANDOM_TRAIN_FRACTION * 100),
        "mae_w": {"blocked_cv_mean": {z: rounded(r.blocked_cv.mean_mae_w, 4) for z, r in trained.items()},
                  "blocked_cv_worst": {z: rounded(r.blocked_cv.worst_mae_w, 4) for z, r in trained.items()},
                  "random_split": {z: rounded(r.random_split[0], 4) for z, r in trained.items()}},
        "mape_pct": {"blocked_cv_mean": {z: rounded(r.blocked_cv.mean_mape_pct, 3) for z, r in trained.items()},
                     "random_split": {z: rounded(r.random_split[1], 3) for z, r in trained.items()}},
        "blocked_cv": {z: fold_summary(r.blocked_cv) for z, r in trained.items()},
        "chosen": {z: r.chosen for z, r in trained.items()},
        "candidates": {z: {name: {"mean_mae_w": rounded(cv.mean_mae_w, 4), "worst_mae_w": rounded(cv.worst_mae_w, 4)}
                           for name, cv in r.candidates.items()} for z, r in trained.items()},
        "xgboost": {z: dict(r.params, num_boost_round=rounds) for z, r in trained.items()},
    }


def write_model(out_dir, name, table, names, boosters, report, rounds=ROUNDS, folds=FOLDS):
    """Writes model.json and <zone>.json boosters into `out_dir` (created if needed)."""
    os.makedirs(out_dir, exist_ok=True)
    targets = []
    for zone, booster in boosters.items():
        booster.save_model(os.path.join(out_dir, "%s.json" % zone))
        targets.append({"zone": zone, "file": "%s.json" % zone})
    metadata = {
        "format": FORMAT,
        "name": name,
        "version": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "type": "xgboost",
        "output": "absolute",
        "features": feature_units(names),
        "targets": targets,
        "cpu": {"model": table.cpu_model, "count": int(table.cpu_count)},
        "expected_error_w": {z: rounded(r.blocked_cv.mean_mae_w, 4) for z, r in report.items()
                             if isinstance(r, ZoneResult)},
        "training": dict({"source": os.path.basename(table.source), "source_kind": table.kind,
                          "rows": int(len(table.X))}, **training_summary(report, rounds, folds),
                         notes=list(table.notes)),
    }
    with open(os.path.join(out_dir, "model.json"), "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=2, allow_nan=False)
        f.write("\n")
    return metadata


def format_report(report, names):
    """The per-zone summary train prints: the choice, each fold's MAE, mean, worst, random split."""
    lines = ["features: " + ", ".join(names)]
    for zone, r in report.items():
        if not isinstance(r, ZoneResult):
            lines.append("%-8s skipped: %s" % (zone, r["skipped"]))
            continue
        lines.append("%-8s %d rows, chosen: %s" % (zone, r.rows, r.chosen))
        for name, cv in r.candidates.items():
            lines.append("  %-17s blocked-CV MAE (W) per fold %s  mean %.2f  worst %.2f%s" % (
                name, " ".join("%.2f" % f.mae_w for f in cv.folds), cv.mean_mae_w, cv.worst_mae_w,
                "  <- chosen" if name == r.chosen else ""))
        lines.append("  %-17s random-split MAE %.2f W (MAPE %.1f %%), blocked-CV mean MAPE %.1f %%" % (
            r.chosen, r.random_split[0], r.random_split[1], r.blocked_cv.mean_mape_pct))
        if r.floor:
            lines.append("  floor per fold (neighbours seen): own block %s; all rows %s" % (
                " ".join("%.2f" % v for v in r.floor.own_block), " ".join("%.2f" % v for v in r.floor.all_rows)))
    return "\n".join(lines)


def main(args):
    """CLI: python3 -m keplershm train RECORDING|CSV --out DIR [--name N] [--features a,b] ..."""
    table = load(args.input, args.csv_cpu_time_unit)
    if args.cpu_model is not None:
        table = table._replace(cpu_model=args.cpu_model)
    if args.cpu_count is not None:
        table = table._replace(cpu_count=args.cpu_count)
    for note in table.notes:
        print("note: " + note, file=sys.stderr)
    for feature, why in table.unavailable.items():
        print("feature %s left out: %s" % (feature, why), file=sys.stderr)
    features = args.features.split(",") if args.features else None
    candidates = args.candidates.split(",") if args.candidates else None
    names, boosters, report = train_table(table, features, args.rounds, args.seed, args.folds, candidates)
    name = args.name or os.path.basename(os.path.normpath(args.out))
    write_model(args.out, name, table, names, boosters, report, args.rounds, args.folds)
    print(format_report(report, names))
    csv_only = [n for n in names if n not in FEATURES]
    print("model %s written to %s" % (name, args.out))
    if csv_only:
        print("note: features %s exist only in the CSV: kepler-estimate will refuse this model on a node (train "
              "with --features from: %s to serve it)" % (", ".join(csv_only), ", ".join(n for n in names if n in FEATURES)),
              file=sys.stderr)
    return 0
