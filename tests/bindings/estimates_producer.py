"""Misbehaving external models for the estimator tests: `estimates_producer.py MODE COLLECTOR OUT [DELAY_S]`.

Follows the collector segment COLLECTOR and publishes into the estimates segment OUT. Prints "ready"
once OUT exists. Modes:

* ``slow``: answers every frame correctly (the curve), but DELAY_S seconds after reading it (a model
  with that latency and full throughput);
* ``hostile``: for each frame, one answer from a rotation of broken ones (non-finite rows, a zone the
  segment does not declare, producer ids of nothing, frames never read, a duplicate, too many rows),
  written straight through the C writer so nothing is checked on this side.
"""
import collections
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keplershm  # noqa: E402
from keplershm import estimates  # noqa: E402
from keplershm.errors import Timeout  # noqa: E402
from keplershm.model import CurveModel  # noqa: E402
from keplershm.serve import frame_table  # noqa: E402
from keplershm.writer import SEGMENT_ESTIMATES, Writer  # noqa: E402

HUGE = 65537  # one row more than kepler-estimate accepts
# The "long forgotten" answer names the frame this many sequences back. kepler-estimate remembers the last 16
# frames it read, so the hostile rotation starts only once that frame exists and is surely forgotten: with
# max(1, n - 1000) a young collector's frame 1 was still remembered and unanswered, and the answer was accepted.
FORGOTTEN = 40


def curve_watts(frame):
    return {z: float(w[0]) for z, w in CurveModel().predict(frame_table(frame)).items()}


def raw_answer(writer, generation, sequence, rows):
    """Rows (zone_index, workload_index, pid, joules) straight into a draft."""
    draft = writer.begin()
    draft.header["producer_generation"], draft.header["producer_sequence"] = generation, sequence
    out = draft.estimates[:len(rows)]
    out["zone_index"] = [r[0] for r in rows]
    out["workload_index"] = [r[1] for r in rows]
    out["pid"] = [r[2] for r in rows]
    out["energy_joules"] = out["power_watts"] = [r[3] for r in rows]
    draft.estimate_count = len(rows)
    writer.commit(draft)


def hostile(frame, writer, turn):
    """Writes the turn's broken answer to `frame`; False (nothing written) while it is too young to have a
    forgotten predecessor."""
    node, no = estimates.NO_INDEX, estimates.NO_INDEX
    g, n = frame.generation, frame.sequence
    if n <= FORGOTTEN:
        return False
    broken = [
        lambda: raw_answer(writer, g, n, [(0, no, 0, math.nan)]),
        lambda: raw_answer(writer, g, n, [(5, no, 0, 10.0)]),
        lambda: raw_answer(writer, 0, 0, [(0, no, 0, 10.0)]),
        lambda: raw_answer(writer, g ^ 0x5a5a, n, [(0, no, 0, 10.0)]),      # a generation never read
        lambda: raw_answer(writer, g, n - FORGOTTEN, [(0, no, 0, 10.0)]),  # long forgotten
        lambda: [raw_answer(writer, g, n, [(node, no, 0, 10.0)]) for _ in range(2)],  # twice
        lambda: raw_answer(writer, g, n, [(node, no, 0, 10.0)] + [(no, no, 7, 0.0)] * (HUGE - 1)),
    ]
    broken[turn % len(broken)]()
    return True


def main():
    mode, collector, out = sys.argv[1], sys.argv[2], sys.argv[3]
    delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    if mode == "slow":
        writer = keplershm.EstimatesWriter(out, model="slow", version="1", zones=["package"], replace_live=True)
        beat = writer.heartbeat
    else:
        writer = Writer(out, segment_kind=SEGMENT_ESTIMATES, process_capacity=HUGE, workload_capacity=1, zone_capacity=1,
                        cpu_capacity=1, string_capacity=64, node_name="hostile", cpu_model="0",
                        zones=[dict(name="package", kind="package")], replace_live=True)
        beat = writer.heartbeat
    print("ready", flush=True)
    reader = None
    due = collections.deque()  # (time, frame)
    turn = 0
    while True:
        beat()
        while due and due[0][0] <= time.monotonic():
            _, frame = due.popleft()
            estimates.publish_estimates(writer, frame, curve_watts(frame))
        if reader is None:
            try:
                reader = keplershm.Reader(shm_name=collector, sections=("processes", "cpus", "unaccounted"))
            except keplershm.KeplershmError:
                time.sleep(0.05)
                continue
        try:
            frame = reader.next(timeout=0.05)
        except Timeout:
            continue
        if mode == "slow":
            due.append((time.monotonic() + delay, frame))
        else:
            turn += hostile(frame, writer, turn)


if __name__ == "__main__":
    main()
