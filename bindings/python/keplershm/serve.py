"""Serving a model over the estimates channel: follow the collector's live frames and answer each one.

``python3 -m keplershm serve-model --shm-name keplershm --out kepler-est-mine --model models/mine`` loads an
XGBoost model directory (MODELS.md) or ``curve[:idle_w=..,max_w=..]``, computes each frame's node
features exactly as kepler-estimate does, and publishes the predicted watts per zone through
:func:`keplershm.publish_estimates`. :func:`follow` is the loop alone, for models of your own (see
``bindings/python/examples/linear_model.py``).

The collector may start later, stop or restart: the loop waits for it and follows new generations.
SIGTERM and Ctrl-C retire the estimates segment (a clean stop for the estimator).
"""
import signal
import sys
import time

from .dataset import Table
from .errors import InputError, KeplershmError, Timeout, WriterGone
from .estimates import EstimatesWriter, publish_estimates
from .features import FEATURES, METRIC_NAMES, node_features
from .reader import Reader
from .schema import np

SECTIONS = ("processes", "cpus", "unaccounted", "workloads")  # what node features need (+ workload count)


def frame_table(frame):
    """A one-row :class:`~keplershm.dataset.Table` of the frame's node features (NaN = unavailable)."""
    values = node_features(frame)
    X = np.array([list(values.values())], dtype=np.float64)
    unavailable = {name: "metric %s is missing from frame %d" % (METRIC_NAMES.get(FEATURES[name].metric, "?"), frame.sequence)
                   for name, v in values.items() if v != v}
    return Table("frame %d" % frame.sequence, "frame", list(values), X, {}, np.array([frame.interval_end_ns / 1e9]),
                 np.array([frame.sequence]), frame.segment.cpu_model, frame.segment.cpu_count, unavailable, [])


def follow(shm_name, writer, predict, *, duration_s=None, max_frames=None, log=None, poll_s=0.25):
    """Answers every frame of the live segment ``shm_name`` with ``predict(frame)`` ({zone: watts}, or None
    to skip a frame) through ``writer`` (an :class:`EstimatesWriter`) until ``duration_s`` or ``max_frames``
    (None: forever). A predict that raises InputError or ValueError skips the frame (logged once per
    message).
    Returns the number of frames answered."""
    log = log or (lambda text: print("keplershm serve-model: %s" % text, file=sys.stderr, flush=True))
    end = None if duration_s is None else time.monotonic() + duration_s
    answered, reader, said = 0, None, set()

    def once(text):
        if text not in said:
            said.add(text)
            log(text)

    try:
        while (end is None or time.monotonic() < end) and (max_frames is None or answered < max_frames):
            writer.heartbeat()  # alive even while there is nothing to answer
            if reader is None:
                try:
                    reader = Reader(shm_name=shm_name, sections=SECTIONS, writer_grace_s=poll_s)
                    once("following segment '%s'" % shm_name)
                except KeplershmError as e:  # not there yet, being replaced, or broken: look again
                    once("waiting for segment '%s' (%s)" % (shm_name, e))
                    time.sleep(poll_s)
                    continue
            try:
                frame = reader.next(timeout=poll_s)
            except Timeout:
                continue
            except WriterGone as e:
                once("collector gone (%s); waiting for it" % e)
                reader.close()
                reader = None
                continue
            try:
                watts = predict(frame)
            except (InputError, ValueError) as e:
                once("frame %d not answered: %s" % (frame.sequence, e))
                continue
            if watts:
                publish_estimates(writer, frame, watts)
                answered += 1
    finally:
        if reader is not None:
            reader.close()
    return answered


class _Stop(Exception):
    pass


def _raise_stop(*_):
    raise _Stop()


def main(args):
    from .model import load_model
    model = load_model(args.model)
    name = args.name or model.name
    version = args.version or (model.metadata.get("version", "") if hasattr(model, "metadata") else
                               "curve idle_w=%g max_w=%g" % (model.idle_w, model.max_w))

    def predict(frame):
        return {zone: float(watts[0]) for zone, watts in model.predict(frame_table(frame)).items()}

    signal.signal(signal.SIGTERM, _raise_stop)
    with EstimatesWriter(args.out, model=name, version=version, zones=model.zones,
                         replace_live=args.replace) as writer:
        print("keplershm serve-model: model %s (version %s, zones %s) answers '%s' in estimates segment '%s'" %
              (name, version or "-", ", ".join(model.zones), args.shm_name, args.out), file=sys.stderr, flush=True)
        try:
            follow(args.shm_name, writer, predict, duration_s=args.duration, max_frames=args.frames)
        except (_Stop, KeyboardInterrupt):
            pass
    return 0
