"""Command line of the research tools (record, train, analyze, plot, serve-model, kepler-model). Each subcommand's work lives in its own module; this file only
parses arguments and turns expected failures (bad input, missing segment) into one clear line and
exit status 2 instead of a traceback."""
import argparse
import sys

from .errors import InputError, KeplershmError
from .units import parse_duration


def _duration(text):
    """argparse type: the daemons' duration grammar (keplershm.units), in seconds."""
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _parser():
    p = argparse.ArgumentParser(prog="python3 -m keplershm", description="keplershm research tools")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("record", help="record a live segment, or a remote kepler-feed, into a file (through "
                                      "libkeplershm's recorder)")
    source = r.add_mutually_exclusive_group(required=True)
    source.add_argument("--shm-name", help="segment name under /dev/shm (kepler-collect's --shm-name)")
    source.add_argument("--remote", metavar="HOST:PORT", help="a kepler-feed to subscribe to (gRPC)")
    r.add_argument("--sections", help="with --remote: comma-separated sections to record (default all)")
    r.add_argument("--token-file", help="with --remote: file holding the feed's bearer token")
    r.add_argument("--tls-ca", help="with --remote: use TLS, trusting this CA (PEM) for the feed's certificate")
    r.add_argument("--tls-cert", help="with --remote and --tls-ca: client certificate (PEM)")
    r.add_argument("--tls-key", help="with --remote and --tls-ca: client private key (PEM)")
    r.add_argument("--allow-plaintext-token", action="store_true",
                   help="with --remote and --token-file but no --tls-ca: send the token in plain text to a target "
                        "that is not loopback (refused otherwise: anyone on the path could read it)")
    r.add_argument("--out", required=True, help="recording file to create")
    r.add_argument("--duration", help="stop after this long (30, 30s, 5m, 2h); default: until the writer retires")
    r.add_argument("--max-size", help="stop before the file exceeds this size (500M, 2G)")

    t = sub.add_parser("train", help="train an XGBoost node power model from a recording or a Kepler CSV")
    t.add_argument("input", help="keplershm recording, or Kepler model-db CSV")
    t.add_argument("--out", required=True, help="model directory to write (model.json + <zone>.json)")
    t.add_argument("--name", help="model name (default: the directory name)")
    t.add_argument("--features", help="comma-separated feature names (default: every available feature that "
                                      "kepler-estimate computes from frames)")
    t.add_argument("--csv-columns", action="store_true",
                   help="without --features: also train on the CSV-only columns (cgroupfs_*, kubelet_*); "
                        "kepler-estimate refuses such a model on a node")
    t.add_argument("--extrapolation-slopes", action="store_true",
                   help="write per-zone watts-per-unit slopes that carry predictions beyond the training range "
                        "(off by default: on Kepler's data they raised the error beyond the range more often "
                        "than they cut it; bindings/python/README.md)")
    t.add_argument("--rounds", type=int, default=200, help="boosting rounds (default 200)")
    t.add_argument("--seed", type=int, default=0, help="seed of the random split (default 0)")
    t.add_argument("--folds", type=int, default=5, help="contiguous time blocks of the blocked cross-validation "
                                                        "(default 5)")
    t.add_argument("--candidates", help="comma-separated boosters to choose among (default "
                                        "monotone,monotone-shallow,unconstrained,regularized)")
    t.add_argument("--csv-cpu-time-unit", choices=("ms", "us"), default="ms",
                   help="unit of the CSV's bpf_cpu_time_us column (default ms: see README)")
    t.add_argument("--cpu-model", help="CPU model string to record in the metadata (default: the recording's)")
    t.add_argument("--cpu-count", type=int, help="CPU count to record in the metadata")

    a = sub.add_parser("analyze", help="offline A/B of models against measured power in a recording or CSV")
    a.add_argument("input", help="keplershm recording (or Kepler CSV)")
    a.add_argument("--model", action="append",
                   help="model directory, NAME=DIR, or curve[:idle_w=..,max_w=..]; repeat for A/B")
    a.add_argument("--cv", action="store_true",
                   help="instead: train's blocked cross-validation on the input, error per fold and plot per fold")
    a.add_argument("--folds", type=int, default=5, help="with --cv: contiguous time blocks (default 5)")
    a.add_argument("--candidates", help="with --cv: boosters to evaluate (default: train's)")
    a.add_argument("--features", help="with --cv: comma-separated feature names (default: every available one)")
    a.add_argument("--floor", action="store_true", help="with --cv: also how well each fold can be predicted at all "
                                                        "(models that saw its rows' neighbours; ~3x the time)")
    a.add_argument("--rounds", type=int, default=200, help="with --cv: boosting rounds (default 200)")
    a.add_argument("--out", default="analysis.png", help="PNG to write (default analysis.png)")
    a.add_argument("--table", help="also write the per-model error table as CSV here")
    a.add_argument("--csv-cpu-time-unit", choices=("ms", "us"), default="ms")

    g = sub.add_parser("plot", help="plot estimates CSVs written by kepler-estimate --replay ... --csv")
    g.add_argument("estimates", nargs="+", help="estimates CSV(s); one per replayed primary model")
    g.add_argument("--measured", action="append",
                   help="model name whose node rows are measured power (default: measured, rapl, hwmon, acpi, redfish, pmbus)")
    g.add_argument("--out", default="power.png", help="PNG to write (default power.png)")
    g.add_argument("--top", type=int, default=8, help="containers/processes to show (default 8)")
    s = sub.add_parser("serve-model", help="answer each live frame with a model's node power (estimates channel, "
                                          "imported by kepler-estimate --model NAME=external:SEGMENT)")
    s.add_argument("--shm-name", required=True, help="the collector's segment to follow")
    s.add_argument("--out", required=True, help="estimates segment to publish (kepler-estimate's external:SEGMENT)")
    s.add_argument("--model", required=True, help="model directory, NAME=DIR, or curve[:idle_w=..,max_w=..]")
    s.add_argument("--name", help="model name in the estimates header (default: the model's)")
    s.add_argument("--version", help="model version in the estimates header (default: model.json's version)")
    s.add_argument("--duration", type=_duration, help="stop after this long (30, 30s, 5m; default: until SIGTERM)")
    s.add_argument("--frames", type=int, help="stop after answering this many frames")
    s.add_argument("--replace", action="store_true", help="take the estimates segment name even from a live writer")
    k = sub.add_parser("kepler-model", help="predict with a Kepler 0.7 model-DB file (SGDRegressorTrainer_N.json or "
                                           "XgboostFitTrainer_N.zip), as kepler-estimate's kepler:FILE does")
    k.add_argument("path", help="weights .json or XGBoost .zip from Kepler's model DB")
    k.add_argument("--predict", required=True,
                   help="per-interval feature values, Kepler names: bpf_cpu_time_ms=1200,bpf_page_cache_hit=30,...")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        if args.command == "record":
            from .recorder import main as run
        elif args.command == "train":
            from .research.train import main as run
        elif args.command == "analyze":
            from .research.analyze import main as run
        elif args.command == "kepler-model":
            from .research.kepler_model import main as run
        elif args.command == "serve-model":
            from .serve import main as run
        else:
            from .research.plot import main as run
        return run(args)
    except (InputError, KeplershmError, ValueError, OSError) as e:
        print("keplershm %s: %s" % (args.command, e), file=sys.stderr)
        return 2
