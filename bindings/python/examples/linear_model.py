#!/usr/bin/env python3
"""A numpy-only linear power model that answers the collector's live frames (the estimates channel).

    # fit on a recording with measured power, then serve on the live segment:
    python3 linear_model.py --fit run.kshm --shm-name keplershm --out kepler-est-linear
    kepler-estimate --shm-name keplershm --model linear=external:kepler-est-linear   # A/B against the others

Per zone the model is watts = intercept + Σ coefficient × feature, fitted by least squares over the
node features of MODELS.md that every frame of the recording has (computed here by the same code the
estimator's features are tested against). ``--save FILE`` writes the coefficients as JSON and
``--load FILE`` serves them without a recording. Stop it with Ctrl-C or SIGTERM (a clean stop).
"""
import argparse
import json
import signal
import sys

import numpy as np

import keplershm
from keplershm import dataset
from keplershm.features import node_features
from keplershm.serve import follow


class LinearModel:
    """{zone: (intercept, {feature: coefficient})} over named node features."""

    def __init__(self, zones):
        self.zones = zones

    @classmethod
    def fit(cls, recording):
        table = dataset.load(recording)
        usable = [j for j, name in enumerate(table.feature_names)
                  if name not in table.unavailable and np.isfinite(table.X[:, j]).all() and table.X[:, j].std() > 0]
        names = [table.feature_names[j] for j in usable]
        design = np.column_stack([np.ones(len(table.X))] + [table.X[:, j] for j in usable])
        zones = {}
        for zone, watts in table.targets.items():
            rows = np.isfinite(watts)
            solution, *_ = np.linalg.lstsq(design[rows], watts[rows], rcond=None)
            zones[zone] = (float(solution[0]), dict(zip(names, map(float, solution[1:]))))
        if not zones:
            raise SystemExit("%s has no measured power to fit" % recording)
        return cls(zones)

    def predict(self, frame):
        """{zone: watts} for one frame (clamped at 0 W, as kepler-estimate clamps its models)."""
        features = node_features(frame)
        out = {}
        for zone, (intercept, coefficients) in self.zones.items():
            watts = intercept + sum(c * features[name] for name, c in coefficients.items())
            if not np.isfinite(watts):
                return None  # a feature this frame lacks: no answer (the estimator counts it missing)
            out[zone] = max(0.0, watts)
        return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--fit", help="recording with measured power to fit the model on")
    source.add_argument("--load", help="coefficients written by --save")
    p.add_argument("--save", help="write the fitted coefficients here (JSON)")
    p.add_argument("--shm-name", help="collector segment to follow (omit to fit and save only)")
    p.add_argument("--out", default="kepler-est-linear", help="estimates segment to publish")
    p.add_argument("--name", default="linear", help="model name in the estimates header")
    p.add_argument("--frames", type=int, help="stop after answering this many frames")
    args = p.parse_args()

    if args.fit:
        model = LinearModel.fit(args.fit)
    else:
        with open(args.load) as f:
            model = LinearModel({zone: (v[0], v[1]) for zone, v in json.load(f).items()})
    if args.save:
        with open(args.save, "w") as f:
            json.dump(model.zones, f, indent=1)
    for zone, (intercept, coefficients) in model.zones.items():
        terms = " + ".join("%.6g × %s" % (c, n) for n, c in coefficients.items())
        print("%s W = %.6g + %s" % (zone, intercept, terms or "0"), file=sys.stderr, flush=True)
    if not args.shm_name:
        return 0

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # SystemExit unwinds the with: a clean stop
    version = "lstsq %s" % (args.fit or args.load)
    with keplershm.EstimatesWriter(args.out, model=args.name, version=version[-127:], zones=list(model.zones)) as out:
        follow(args.shm_name, out, model.predict, max_frames=args.frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
