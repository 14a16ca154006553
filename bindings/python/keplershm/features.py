"""Node features and power targets of a frame, exactly as MODELS.md defines them.

The estimator (kepler-estimate) computes the same numbers in C++; a model trained here predicts the
same watts there only if both sides agree bit for bit on the inputs. So sums run in double precision
in record order (sequential, like the C++ loop: ``np.cumsum`` is sequential, ``np.sum`` is not), a
hardware counter is summed only over records whose ``*_VALID`` flag is set, and a feature whose metric
bit is missing from the frame's ``metric_mask`` is *unavailable* (NaN), never zero.
"""
import math
from collections import OrderedDict, namedtuple

from .schema import np

# enum keplershm_metric
CPU_TIME, CYCLES, INSTRUCTIONS, CACHE_MISSES, PAGE_CACHE, SOFTIRQ, NODE_CPU, ENERGY = (1 << i for i in range(8))
METRIC_NAMES = {CPU_TIME: "CPU_TIME", CYCLES: "CYCLES", INSTRUCTIONS: "INSTRUCTIONS", CACHE_MISSES: "CACHE_MISSES",
                PAGE_CACHE: "PAGE_CACHE", SOFTIRQ: "SOFTIRQ", NODE_CPU: "NODE_CPU", ENERGY: "ENERGY"}
# enum keplershm_process_flag
CYCLES_VALID, INSTRUCTIONS_VALID, CACHE_MISSES_VALID, PAGE_CACHE_VALID, SOFTIRQ_VALID = (1 << i for i in range(5))
ZONE_VALID = 1
NET_TX, NET_RX, BLOCK = 2, 3, 4  # softirq vectors Kepler exports

Feature = namedtuple("Feature", "name unit metric")
FEATURES = OrderedDict((f.name, f) for f in [
    Feature("cpu_time_ms_per_s", "ms/s", CPU_TIME),
    Feature("node_cpu_busy_ms_per_s", "ms/s", NODE_CPU),
    Feature("cpu_count", "count", 0),
    Feature("cycles_per_s", "1/s", CYCLES),
    Feature("instructions_per_s", "1/s", INSTRUCTIONS),
    Feature("cache_misses_per_s", "1/s", CACHE_MISSES),
    Feature("page_cache_hits_per_s", "pages/s", PAGE_CACHE),
    Feature("softirq_net_tx_per_s", "1/s", SOFTIRQ),
    Feature("softirq_net_rx_per_s", "1/s", SOFTIRQ),
    Feature("softirq_block_per_s", "1/s", SOFTIRQ),
])
TARGET_ZONES = ("package", "core", "uncore", "dram", "psys", "platform")
CSV_PREFIX = "csv:"


def _seq_sum(values):
    """Left-to-right double sum (the C++ loop's order)."""
    if values is None or len(values) == 0:
        return 0.0
    return float(np.cumsum(np.asarray(values, dtype=np.float64))[-1])


def _masked(processes, field, flag, column=None):
    if processes is None or len(processes) == 0:
        return None
    valid = (processes["flags"] & flag) != 0
    values = processes[field][valid]
    return values if column is None else values[:, column]


def frame_dt(frame):
    """Interval in seconds; a frame with an empty or reversed interval is refused (no rate exists)."""
    if frame.interval_end_ns <= frame.interval_start_ns:
        raise ValueError("frame %d has an empty or reversed interval (%d..%d ns)" %
                         (frame.sequence, frame.interval_start_ns, frame.interval_end_ns))
    return (frame.interval_end_ns - frame.interval_start_ns) / 1e9


def node_features(frame):
    """OrderedDict feature name → value (NaN where unavailable) for one frame (numpy mode)."""
    dt = frame_dt(frame)
    mask = frame.metric_mask
    p = frame.processes
    cpu_ns = _seq_sum(p["cpu_time_ns"] if p is not None else None)
    u = frame.unaccounted
    if u is not None:
        cpu_ns += float(u["cpu_time_ns"])
    busy = 0.0
    cpus = frame.cpus
    if cpus is not None and len(cpus):
        # C++: busy += user + nice + system + irq + softirq + steal, CPU by CPU: same grouping here.
        per_cpu = cpus["user_ns"].astype(np.float64)
        for field in ("nice_ns", "system_ns", "irq_ns", "softirq_ns", "steal_ns"):
            per_cpu = per_cpu + cpus[field].astype(np.float64)
        busy = _seq_sum(per_cpu)
    values = {
        "cpu_time_ms_per_s": cpu_ns / 1e6 / dt,
        "node_cpu_busy_ms_per_s": busy / 1e6 / dt,
        "cpu_count": float(frame.segment.cpu_count),
        "cycles_per_s": _seq_sum(_masked(p, "cycles", CYCLES_VALID)) / dt,
        "instructions_per_s": _seq_sum(_masked(p, "instructions", INSTRUCTIONS_VALID)) / dt,
        "cache_misses_per_s": _seq_sum(_masked(p, "cache_misses", CACHE_MISSES_VALID)) / dt,
        "page_cache_hits_per_s": _seq_sum(_masked(p, "page_cache_hits", PAGE_CACHE_VALID)) / dt,
        "softirq_net_tx_per_s": _seq_sum(_masked(p, "softirq", SOFTIRQ_VALID, NET_TX)) / dt,
        "softirq_net_rx_per_s": _seq_sum(_masked(p, "softirq", SOFTIRQ_VALID, NET_RX)) / dt,
        "softirq_block_per_s": _seq_sum(_masked(p, "softirq", SOFTIRQ_VALID, BLOCK)) / dt,
    }
    return OrderedDict((name, values[name] if f.metric == 0 or mask & f.metric else math.nan)
                       for name, f in FEATURES.items())


def zone_power(frame):
    """dict zone kind → measured watts over the interval, for kinds with at least one VALID sample.

    Sums energy_delta_uj of every sample whose header zone has that kind (e.g. package-0 + package-1).
    """
    dt = frame_dt(frame)
    zones = frame.zones
    if zones is None or len(zones) == 0:
        return {}
    kinds = {z.index: z.kind for z in frame.segment.zones}
    totals = {}
    for sample in zones:
        if not int(sample["flags"]) & ZONE_VALID:
            continue
        kind = kinds.get(int(sample["zone_index"]))
        if kind in TARGET_ZONES:
            totals[kind] = totals.get(kind, 0.0) + float(sample["energy_delta_uj"])
    return {kind: uj / 1e6 / dt for kind, uj in totals.items()}


def unit_of(name):
    """Unit string of a feature name (CSV features: 'csv')."""
    f = FEATURES.get(name)
    return f.unit if f else "csv"
