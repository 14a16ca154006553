"""Training XGBoost node power models that kepler-estimate serves.

One booster per measured zone (package, dram, ...), over node features per MODELS.md. A model in
service meets workloads it never saw, so the error that matters is on held-out *time*: each zone is
evaluated by blocked cross-validation (:mod:`keplershm.research.validation`: k contiguous folds, per fold, mean
and worst), with a seeded random split beside it (what most published tables report).

Trees fit their training range and nothing else; what keeps them honest outside it is physics. Four
candidate boosters are evaluated by the same folds and, per zone, the one with the lowest *worst
forward-chained* fold error is kept (fold k predicted by a model of folds < k only: RULE, below):

* ``monotone``: power never falls when a physical feature (CPU time, cycles, instructions, misses,
  page-cache hits, softirqs) rises — XGBoost's monotone constraints;
* ``monotone-shallow``: the same with depth-3 trees (smoother, fewer feature interactions);
* ``unconstrained``: plain trees (where a feature's relation to power is genuinely not monotone on the
  training data, e.g. CPU time alone across workload kinds, constraints cost more than they give).
* ``regularized``: plain trees held back — depth 4, leaf values shrunk (L2 ``lambda`` 10) and a split kept
  only when it gains at least ``gamma`` 5 — so a leaf cannot follow a few rows of one workload (on
  Kepler's data it wins, by a little, where CPU time is the main feature and CounterOnly's DRAM).

All of them are plain squared-error XGBoost boosters: kepler-estimate serves any of them through the C
API with the same parity as before. The chosen one is trained on all rows.

Why that rule: the mean blocked-CV error (the rule before it) rewards interpolation, since every middle
fold has training rows on both sides; on Kepler's nx12 data it picked plain trees that scored 23.8 W
(frame features) and 26.7 W (with CSV columns) on the last fifth, a load regime the earlier four never
reached. Measured nested (bench/models/choice_rules.py: each fold graded on a choice made without its
errors), the worst forward-chained fold is the rule that picks what extrapolates: 7.7 W there, and no
group got more than 0.3 W worse on any summary. The mean of the forward folds does not do it (one
fold of regime change is diluted by the others); the worst blocked fold neither (blocked folds never ask
about later load).

The error reported is nested too (nested_choice(): per fold, the choice made without it), and its mean
goes into the metadata as ``expected_error_w`` (exported by kepler-estimate as
``kepler_model_expected_error_watts``); the metadata keeps every fold, forward and blocked, the random
split and every candidate's errors, and says in ``serves`` where the model can run.
"""
import datetime
import json
import os
import sys
from collections import OrderedDict, namedtuple

from .. import extrapolation
from ..dataset import load
from ..errors import InputError
from ..features import FEATURES
from ..model import FORMAT, _xgboost, feature_units, select_columns
from ..schema import np
from .validation import (FOLDS, RANDOM_TRAIN_FRACTION, blocked_cv, fold_summary, forward_cv, neighbour_cv, random_split,
                         rounded)

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

ZoneResult = namedtuple("ZoneResult", "rows chosen blocked_cv random_split candidates params floor forward nested")
ZoneResult.__doc__ = """One zone's evaluation: the chosen candidate's BlockedCv and (MAE, MAPE) random
split, every candidate's BlockedCv by name, the XGBoost parameters of the chosen one, (when asked
for, else None) the Floor under each fold, every candidate's forward-chained [Fold] by name, and the
nested figure: per blocked fold, (candidate, its MAE there) with the choice made without that fold."""

Scores = namedtuple("Scores", "blocked forward")
Scores.__doc__ = """What a choice rule sees of one candidate: its blocked-CV MAEs and its forward-chained
MAEs (lists of W, some folds possibly left out)."""

Floor = namedtuple("Floor", "own_block all_rows")
Floor.__doc__ = """Per fold, how well its rows can be predicted by models that saw their neighbours in time
(validation.neighbour_cv), the lowest MAE of the candidates: trained on the fold's own other rows, and on
all other rows. A fold far above its floor is a failure to generalize; a high floor, power the features
do not carry."""


def choose_features(table, wanted=None, csv_columns=False):
    """Feature names to train on: `wanted` (all must be available), else every available one that
    kepler-estimate computes from frames, and with `csv_columns` the CSV-only columns too. Without the
    flag a default model is one a node can serve: kepler-estimate refuses a feature it cannot compute."""
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
    return [n for n in table.feature_names if n not in table.unavailable and (csv_columns or n in FEATURES)]


def csv_only(names):
    """The features among `names` that exist only in a CSV (no frame carries them)."""
    return [n for n in names if n not in FEATURES]


def serving(names):
    """model.json's "serves": where the model can run. Optional and ignored by kepler-estimate's parser
    (which refuses the model itself if a feature is not one it computes); for people and tools."""
    only = csv_only(names)
    return {"node": not only, "csv_only_features": only,
            "where": "a node (kepler-estimate computes every feature from frames)" if not only else
                     "offline only (analyze on a CSV with these columns): kepler-estimate refuses it on a node"}


def choose_candidates(wanted=None):
    """Candidates by name (`wanted`: a list of names; default every one)."""
    if not wanted:
        return list(CANDIDATES.values())
    unknown = [n for n in wanted if n not in CANDIDATES]
    if unknown:
        raise InputError("unknown candidate(s) %s; there are: %s" % (", ".join(unknown), ", ".join(CANDIDATES)))
    return [CANDIDATES[n] for n in wanted]


def physical(names):
    """Per name: whether it is a physical feature (more of it never lowers power): not the CPU count, not
    a CSV-only column (memory sizes, kubelet figures: no such law)."""
    return [n in FEATURES and FEATURES[n].metric != 0 for n in names]


def monotone_constraints(names):
    """XGBoost's constraint string: +1 for physical features, 0 for the others."""
    return "(%s)" % ",".join("1" if p else "0" for p in physical(names))


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


def evaluate_zone(X, y, time_s, names, candidates, rounds=ROUNDS, folds=FOLDS, seed=0, floor=False, rule=None):
    """Blocked CV of every candidate on one zone's rows, the choice, the chosen one's random split, and
    with `floor` the Floor under each fold (about three times the work of the rest)."""
    rule = rule or RULE
    cvs, forward = OrderedDict(), OrderedDict()
    for c in candidates:
        fit_predict = fit_predict_with(candidate_params(c, names), rounds)
        cvs[c.name] = blocked_cv(fit_predict, X, y, time_s, folds)
        forward[c.name] = forward_cv(fit_predict, X, y, time_s, folds)
    chosen = RULES[rule](candidate_scores(cvs, forward))
    params = candidate_params(CANDIDATES[chosen], names)
    split = random_split(fit_predict_with(params, rounds), X, y, seed)
    under = neighbour_floor(X, y, time_s, names, candidates, rounds, folds) if floor else None
    return ZoneResult(len(y), chosen, cvs[chosen], split, cvs, params, under, forward,
                      nested_choice(cvs, forward, rule))


def lowest_mean(fold_maes):
    """The candidate with the lowest mean fold MAE (ties: the first listed), from {candidate: [MAE per
    fold]}: train's rule before forward chaining (RULES[BLOCKED_MEAN] is the same on Scores)."""
    return min(fold_maes, key=lambda name: float(np.mean(fold_maes[name])))


def _lowest(summary, which):
    """A choice rule: the candidate whose `which`(Scores) MAEs have the lowest `summary` (ties: the first
    listed). Forward rules fall back to blocked folds where no forward fold is left to look at (2 folds)."""
    def choose(scores):
        def key(name):
            values = which(scores[name]) or scores[name].blocked
            return float(summary(values))
        return min(scores, key=key)
    return choose


BLOCKED_MEAN = "blocked mean"
RULES = OrderedDict([
    (BLOCKED_MEAN, _lowest(np.mean, lambda s: s.blocked)),
    ("blocked worst", _lowest(max, lambda s: s.blocked)),
    ("forward mean", _lowest(np.mean, lambda s: s.forward)),
    ("forward worst", _lowest(max, lambda s: s.forward)),
    ("forward last", _lowest(lambda v: v[-1], lambda s: s.forward)),
    ("all folds mean", _lowest(np.mean, lambda s: s.blocked + s.forward)),
    ("all folds worst", _lowest(max, lambda s: s.blocked + s.forward)),
])
RULE = "forward worst"  # train's rule (the module's docstring has the measurement behind it)


def candidate_scores(cvs, forward, without=None):
    """{candidate: Scores} from blocked CVs and forward [Fold]s by candidate, fold index `without` left
    out of both."""
    return OrderedDict((name, Scores([f.mae_w for f in cv.folds if f.index != without],
                                     [f.mae_w for f in forward[name] if f.index != without]))
                       for name, cv in cvs.items())


def nested_choice(cvs, forward, rule=RULE):
    """[(candidate, its MAE on the fold)] per blocked fold: the candidate `rule` (a RULES name) picks with
    that fold's errors left out, blocked and forward alike, and its blocked-CV MAE on the fold. On the
    last fold the scored model is the one train on the earlier four fifths would fit; the pick can
    differ from train's there (the other blocked folds' models saw the last fifth), not the grading."""
    picks = []
    for cv_fold in next(iter(cvs.values())).folds:
        name = RULES[rule](candidate_scores(cvs, forward, without=cv_fold.index))
        picks.append((name, cvs[name].folds[cv_fold.index].mae_w))
    return picks


def choice_without_each_fold(cvs, choose=lowest_mean):
    """[(candidate, its MAE on the fold)] per fold: the candidate `choose` (a rule on blocked folds only;
    the old rule, lowest_mean, by default) picks from the *other* folds' errors, and how it does on the
    fold it did not look at. nested_choice() is the same for RULES, which see forward folds too."""
    fold_count = len(next(iter(cvs.values())).folds)
    picks = []
    for held_out in range(fold_count):
        elsewhere = {name: [f.mae_w for f in cv.folds if f.index != held_out] for name, cv in cvs.items()}
        name = choose(elsewhere)
        picks.append((name, cvs[name].folds[held_out].mae_w))
    return picks


def evaluate_table(table, features=None, rounds=ROUNDS, seed=0, folds=FOLDS, candidates=None, floor=False,
                   csv_columns=False):
    """(feature names, {zone: ZoneResult, or {"skipped": reason}}) for every zone with measured power in
    `table`. Raises InputError when no feature is available or no zone has enough measured rows."""
    names = choose_features(table, features, csv_columns)
    if not names:
        left = csv_only(n for n in table.feature_names if n not in table.unavailable)
        raise InputError("%s: no feature is available to train on (%s)%s" % (
            table.source, "; ".join("%s: %s" % kv for kv in table.unavailable.items()) or "none a node computes",
            "; CSV-only columns %s need --csv-columns (kepler-estimate cannot serve such a model on a node)" %
            ", ".join(left) if left else ""))
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


def train_table(table, features=None, rounds=ROUNDS, seed=0, folds=FOLDS, candidates=None, csv_columns=False):
    """Evaluates (evaluate_table()) and trains the chosen booster of each zone on all its rows. Returns
    (features, {zone: booster}, report)."""
    names, report = evaluate_table(table, features, rounds, seed, folds, candidates, csv_columns=csv_columns)
    X_all = select_columns(table, names, "being trained")
    boosters = {}
    for zone, result in report.items():
        if isinstance(result, ZoneResult):
            rows = ~np.isnan(table.targets[zone])
            boosters[zone] = fit(X_all[rows], table.targets[zone][rows], rounds, result.params)
    return names, boosters, report


def nested_summary(picks):
    """The JSON form of nested_choice()'s picks: per fold the candidate and its MAE, mean and worst."""
    maes = [mae for _, mae in picks]
    return {"folds": [{"chosen": name, "mae_w": rounded(mae, 4)} for name, mae in picks],
            "mean_mae_w": rounded(float(np.mean(maes)), 4), "worst_mae_w": rounded(max(maes), 4)}


def training_summary(report, rounds, folds):
    """model.json's record of how each zone was evaluated and chosen."""
    trained = {z: r for z, r in report.items() if isinstance(r, ZoneResult)}
    return {
        "evaluation": "nested (the headline, and expected_error_w's mean): %d contiguous folds in time, each "
                      "predicted by the candidate the rule '%s' picks without that fold's errors; blocked_cv: the "
                      "chosen candidate on every fold (the choice saw them); forward: fold k predicted by a model "
                      "of folds < k; random: seeded %d/%d split, for comparison only" % (
                          folds, RULE, RANDOM_TRAIN_FRACTION * 100, 100 - RANDOM_TRAIN_FRACTION * 100),
        "mae_w": {"blocked_cv_mean": {z: rounded(r.blocked_cv.mean_mae_w, 4) for z, r in trained.items()},
                  "blocked_cv_worst": {z: rounded(r.blocked_cv.worst_mae_w, 4) for z, r in trained.items()},
                  "random_split": {z: rounded(r.random_split[0], 4) for z, r in trained.items()}},
        "mape_pct": {"blocked_cv_mean": {z: rounded(r.blocked_cv.mean_mape_pct, 3) for z, r in trained.items()},
                     "random_split": {z: rounded(r.random_split[1], 3) for z, r in trained.items()}},
        "blocked_cv": {z: fold_summary(r.blocked_cv) for z, r in trained.items()},
        "nested": {z: nested_summary(r.nested) for z, r in trained.items()},
        "rule": RULE,
        "chosen": {z: r.chosen for z, r in trained.items()},
        "candidates": {z: {name: {"mean_mae_w": rounded(cv.mean_mae_w, 4), "worst_mae_w": rounded(cv.worst_mae_w, 4),
                                  "forward_mae_w": [rounded(f.mae_w, 4) for f in r.forward[name]]}
                           for name, cv in r.candidates.items()} for z, r in trained.items()},
        "xgboost": {z: dict(r.params, num_boost_round=rounds) for z, r in trained.items()},
    }


def extrapolation_metadata(table, names, boosters, slopes=False):
    """model.json's "training_range" (over every trained zone's rows) and, with `slopes`, "extrapolation":
    each zone's excess slopes (keplershm.extrapolation). Off by default: measured on Kepler's nx12 data
    (bench/models/extrapolation.py), the slopes lowered the error of rows beyond the range in 7 of 30
    forward-chained folds and raised it in 23, once from 15.8 to 494 W; the trees' flat edge is bounded."""
    X = select_columns(table, names, "being trained")
    trained = np.zeros(len(X), dtype=bool)
    for zone in boosters:
        trained |= ~np.isnan(table.targets[zone])
    out = {"training_range": extrapolation.training_range(X[trained], names)}
    if slopes:
        out["extrapolation"] = {}
        for zone in boosters:
            rows = ~np.isnan(table.targets[zone])
            out["extrapolation"][zone] = {f: float("%.6g" % s) for f, s in extrapolation.excess_slopes(
                X[rows], table.targets[zone][rows], names, physical(names)).items()}
    return out


def write_model(out_dir, name, table, names, boosters, report, rounds=ROUNDS, folds=FOLDS, slopes=False):
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
        # The nested mean: the chosen candidate's own blocked-CV mean is graded on the folds that chose it.
        "expected_error_w": {z: rounded(float(np.mean([mae for _, mae in r.nested])), 4) for z, r in report.items()
                             if isinstance(r, ZoneResult)},
        "serves": serving(names),
        **extrapolation_metadata(table, names, boosters, slopes),
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
            lines.append("  %-17s forward-chained MAE (W), folds 2..%d %s" % (
                "", len(cv.folds), " ".join("%.2f" % f.mae_w for f in r.forward[name])))
        maes = [mae for _, mae in r.nested]
        lines.append("  nested (choice by '%s' made without the fold) %s  mean %.2f  worst %.2f" % (
            RULE, " ".join("%.2f%s" % (mae, "" if n == r.chosen else "[%s]" % n) for n, mae in r.nested),
            float(np.mean(maes)), max(maes)))
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
    csv_columns = getattr(args, "csv_columns", False)
    if not features and not csv_columns:
        for n in csv_only(n for n in table.feature_names if n not in table.unavailable):
            print("feature %s left out: it exists only in the CSV, kepler-estimate cannot serve it on a node "
                  "(--csv-columns keeps it)" % n, file=sys.stderr)
    names, boosters, report = train_table(table, features, args.rounds, args.seed, args.folds, candidates,
                                          csv_columns)
    name = args.name or os.path.basename(os.path.normpath(args.out))
    write_model(args.out, name, table, names, boosters, report, args.rounds, args.folds,
                getattr(args, "extrapolation_slopes", False))
    print(format_report(report, names))
    only = csv_only(names)
    print("model %s written to %s" % (name, args.out))
    if only:
        print("note: features %s exist only in the CSV: kepler-estimate will refuse this model on a node (train "
              "without --csv-columns, or with --features from: %s, to serve it)" % (
                  ", ".join(only), ", ".join(n for n in names if n in FEATURES)), file=sys.stderr)
    return 0
