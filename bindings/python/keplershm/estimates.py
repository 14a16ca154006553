"""The estimates channel: a model written in Python answers the collector's frames (PROTOCOL.md §8).

For each collector frame it answers, the model publishes node power per zone (and optionally per
workload or per process) into its own estimates segment; ``kepler-estimate --model NAME=external:SEGMENT``
imports it as a named model, compares it with the meter, exports it under ``kepler_model_*{model=NAME}``
and can make it ``--primary``. Answers are matched to frames by the frame's generation and sequence,
so a model may skip frames or answer late (the estimator counts both) but never answers the wrong one::

    import keplershm
    with keplershm.Reader("kepler") as frames, \\
            keplershm.EstimatesWriter("kepler-est-mine", model="mine", version="1", zones=["package"]) as out:
        for frame in frames:
            keplershm.publish_estimates(out, frame, {"package": my_watts(frame)})

The bytes are written by libkeplershm's writer (``segment_kind = ESTIMATES``); this module only checks
the numbers and fills the rows. An EstimatesWriter is not thread-safe (a segment has one writer).
"""
import math

from .writer import SEGMENT_ESTIMATES, ZONE_KIND_IDS, Writer

NO_INDEX = 0xFFFFFFFF          # zone_index of a whole-node row; workload_index of node and process rows
MAX_WATTS = 1e6                # the estimator refuses more (a broken model, not a computer)
NODE = "node"                  # the zone name of whole-node rows in ``publish_estimates`` dictionaries


class EstimatesWriter:
    """The estimates segment /dev/shm/<shm_name> of one model.

    ``model`` and ``version`` go into the segment header (``node_name`` and ``cpu_model`` of an estimates
    segment) and come out as ``kepler_model_external_info{producer, version}``. ``zones`` are the zones
    the model predicts: kind names (``"package"``, ``"dram"``, ``"psys"``, ``"platform"`` ...) or dicts
    ``{"name", "kind", "socket"}`` for per-socket zones; rows name them by ``name`` (the kind for plain
    kind names). ``max_rows``: rows one answer may have (zone, workload and process rows together).
    """

    def __init__(self, shm_name, *, model, version="", zones=("package",), max_rows=1024, slot_count=8,
                 heartbeat_period_s=1.0, replace_live=False, mode=0o640):
        if not model or len(model.encode()) > 255:
            raise ValueError("model name must be 1 to 255 bytes, got %r" % model)
        if len(version.encode()) > 127:
            raise ValueError("model version must be at most 127 bytes, got %d" % len(version.encode()))
        specs = [dict(name=z, kind=z) if isinstance(z, str) else dict(z) for z in zones]
        if len(specs) > 32:
            raise ValueError("%d zones: an estimates segment holds at most 32" % len(specs))
        self.zone_index = {}
        for i, z in enumerate(specs):
            if z.get("kind") not in ZONE_KIND_IDS:
                raise ValueError("zone %r has kind %r; known kinds: %s" % (z.get("name"), z.get("kind"),
                                                                        ", ".join(ZONE_KIND_IDS)))
            if z["name"] in self.zone_index or z["name"] == NODE:
                raise ValueError("zone name %r is used twice (or is the reserved %r)" % (z["name"], NODE))
            self.zone_index[z["name"]] = i
            z.setdefault("power_source", 0)
        if not 1 <= max_rows <= 65536:
            raise ValueError("max_rows must be between 1 and 65536 (what kepler-estimate accepts)")
        self.max_rows = max_rows
        self.model, self.version, self.name = model, version, shm_name
        self._writer = Writer(shm_name, segment_kind=SEGMENT_ESTIMATES, slot_count=slot_count, process_capacity=max_rows,
                              workload_capacity=1, zone_capacity=1, cpu_capacity=1, string_capacity=64,
                              node_name=model, cpu_model=version, zones=specs, replace_live=replace_live,
                              heartbeat_period_s=heartbeat_period_s, mode=mode)

    def publish(self, frame, zones=None, **rows):
        """Same as :func:`publish_estimates` (self, frame, ...)."""
        return publish_estimates(self, frame, zones, **rows)

    def heartbeat(self):
        """Tell readers the model is alive while it has nothing to answer (no collector frame)."""
        self._writer.heartbeat()

    def close(self, keep_name=False):
        """Retire the segment: the estimator sees a clean stop, not a crash."""
        self._writer.close(keep_name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _watts(value, what):
    try:
        w = float(value)
    except (TypeError, ValueError):
        raise ValueError("%s: %r is not a number of watts" % (what, value)) from None
    if not math.isfinite(w) or w < 0 or w > MAX_WATTS:
        raise ValueError("%s: %r W is not a finite number in [0, %g]" % (what, value, MAX_WATTS))
    return w


def _zone_rows(writer, value, what):
    """(zone_index, watts) rows from watts (whole node) or {zone name: watts}."""
    if not isinstance(value, dict):
        return [(NO_INDEX, _watts(value, what))]
    out = []
    for zone, w in value.items():
        if zone == NODE:
            out.append((NO_INDEX, _watts(w, "%s, node" % what)))
        elif zone in writer.zone_index:
            out.append((writer.zone_index[zone], _watts(w, "%s, zone %s" % (what, zone))))
        else:
            raise ValueError("%s: unknown zone %r; this estimates segment declares %s (and %r for the whole node)"
                             % (what, zone, ", ".join(writer.zone_index) or "none", NODE))
    return out


def publish_estimates(writer, frame, zones=None, *, node=None, workloads=None, processes=None):
    """Publish one answer to the collector frame ``frame``; returns the estimates frame number.

    ``frame`` is a :class:`keplershm.Frame` (or anything with ``sequence``, ``generation``,
    ``interval_start_ns`` and ``interval_end_ns``). Power is in watts over that frame's interval; the
    energy rows carry watts × interval. ``zones``: {zone name: watts} (names as declared by the
    writer, ``"node"`` for the whole node); ``node``: whole-node watts; ``workloads``: {index into the
    frame's WORKLOADS section: watts or {zone: watts}}; ``processes``: {(pid, start_time_ticks): watts
    or {zone: watts}}. kepler-estimate uses the node and zone rows; the others are for other readers.
    Raises ValueError (nothing is published) on an unknown zone, a workload index outside the frame,
    a pid of 0, a value that is not a finite number of watts in [0, 1e6], or more rows than ``max_rows``.
    """
    dt = (int(frame.interval_end_ns) - int(frame.interval_start_ns)) / 1e9
    if dt <= 0:
        raise ValueError("frame %d has an empty or reversed interval: no energy can be given for it" % frame.sequence)
    if int(frame.generation) == 0 or int(frame.sequence) == 0:
        raise ValueError("frame %r has no generation or sequence: it is not a collector frame" % (frame,))
    rows = []  # (zone_index, workload_index, pid, start_time_ticks, watts)
    rows += [(z, NO_INDEX, 0, 0, w) for z, w in _zone_rows(writer, zones or {}, "zones")]
    if node is not None:
        rows.append((NO_INDEX, NO_INDEX, 0, 0, _watts(node, "node")))
    known_workloads = getattr(frame, "workloads", None)
    for index, value in (workloads or {}).items():
        if not isinstance(index, int) or index < 0 or index >= NO_INDEX or \
                (known_workloads is not None and index >= len(known_workloads)):
            raise ValueError("workload index %r is not a workload of frame %d (%s workloads)" % (
                index, frame.sequence, "?" if known_workloads is None else len(known_workloads)))
        rows += [(z, index, 0, 0, w) for z, w in _zone_rows(writer, value, "workload %d" % index)]
    for key, value in (processes or {}).items():
        try:
            pid, start = (int(k) for k in key)
        except (TypeError, ValueError):
            raise ValueError("process key %r is not (pid, start_time_ticks)" % (key,)) from None
        if not 0 < pid < 2 ** 32 or not 0 <= start < 2 ** 64:
            raise ValueError("process key %r: pid must be in 1..2^32-1 and start_time_ticks a u64" % (key,))
        rows += [(z, NO_INDEX, pid, start, w) for z, w in _zone_rows(writer, value, "process %d" % pid)]
    if not rows:
        raise ValueError("nothing to publish for frame %d: give zone, node, workload or process watts" % frame.sequence)
    if len(rows) > writer.max_rows:
        raise ValueError("%d rows for frame %d, more than this writer's max_rows=%d" % (len(rows), frame.sequence,
                                                                                        writer.max_rows))
    draft = writer._writer.begin()
    h = draft.header
    h["producer_sequence"], h["producer_generation"] = int(frame.sequence), int(frame.generation)
    h["interval_start_ns"], h["interval_end_ns"] = int(frame.interval_start_ns), int(frame.interval_end_ns)
    for field in ("interval_start_realtime_ns", "interval_end_realtime_ns"):
        h[field] = int(getattr(frame, field, 0) or 0)
    out = draft.estimates[:len(rows)]
    out["zone_index"] = [r[0] for r in rows]
    out["workload_index"] = [r[1] for r in rows]
    out["pid"] = [r[2] for r in rows]
    out["start_time_ticks"] = [r[3] for r in rows]
    out["power_watts"] = [r[4] for r in rows]
    out["energy_joules"] = [r[4] * dt for r in rows]
    draft.estimate_count = len(rows)
    return writer._writer.commit(draft)
