"""Synthetic frames with known content, published through the C ABI's writer (keplershm.writer).

Power follows a known law of the CPU time (so a trained model must find it), and every record of frame
n encodes n, so a reader can prove it never saw a torn frame.
"""
import math

import numpy as np

import keplershm
from keplershm.writer import Writer

NS = 1_000_000_000
CPU_COUNT = 4
ZONES = [dict(name="package-0", kind="package"), dict(name="dram-0", kind="dram"),
         dict(name="package-1", kind="package", socket=1)]
ALL_METRICS = 0xFF & ~(1 << 1 | 1 << 2 | 1 << 3)  # no hardware counters, like a VM without a PMU


def make_writer(name, slot_count=8, **kwargs):
    return Writer(name, slot_count=slot_count, zones=ZONES, metric_mask=ALL_METRICS, cpu_count=CPU_COUNT,
                  cpu_model="Synthetic CPU @ 1.00GHz", replace_live=True, **kwargs)


def load_at(n):
    """CPU load (0..1) of frame n: slow waves, so a time split meets unseen levels too."""
    return 0.5 + 0.45 * math.sin(n / 17.0) * math.cos(n / 53.0)


def package_watts(cpu_ms_per_s):
    return 20.0 + 0.01 * cpu_ms_per_s + 2e-6 * cpu_ms_per_s ** 2


def fill(draft, n, processes=5):
    """Frame n: `processes` records whose pid/tgid/cpu time encode n; zones with known energy."""
    start, end = n * NS, (n + 1) * NS
    h = draft.header
    h["interval_start_ns"], h["interval_end_ns"] = start, end
    h["interval_start_realtime_ns"], h["interval_end_realtime_ns"] = start + 10 * NS, end + 10 * NS
    h["metric_mask"], h["source"], h["power_source"] = ALL_METRICS, 3, 1
    busy_ns = int(load_at(n) * CPU_COUNT * NS)
    p = draft.processes[:processes]
    p["pid"] = n
    p["tgid"] = np.arange(processes) + 1000
    p["start_time_ticks"] = n
    p["cpu_time_ns"] = busy_ns // processes
    p["flags"] = 1 << 3  # page cache valid
    p["page_cache_hits"] = n * 10
    p["comm"] = [b"proc%d" % i for i in range(processes)]
    draft.process_count = processes
    draft.unaccounted["cpu_time_ns"] = busy_ns - (busy_ns // processes) * processes
    c = draft.cpus[:CPU_COUNT]
    c["cpu"] = np.arange(CPU_COUNT)
    c["user_ns"] = busy_ns // CPU_COUNT
    c["idle_ns"] = NS - busy_ns // CPU_COUNT
    draft.cpu_count = CPU_COUNT
    cpu_ms_per_s = busy_ns / 1e6
    watts = {"package": package_watts(cpu_ms_per_s), "dram": 5.0 + 0.002 * cpu_ms_per_s}
    z = draft.zones[:3]
    z["zone_index"] = [0, 1, 2]
    z["flags"] = 1
    z["read_time_ns"] = end
    # package is split across two sockets (the target is their sum).
    z["energy_delta_uj"] = [int(watts["package"] * 0.6e6), int(watts["dram"] * 1e6), int(watts["package"] * 0.4e6)]
    z["energy_total_uj"] = z["energy_delta_uj"] * n
    draft.zone_count = 3
    return watts


def publish(writer, n, processes=5):
    draft = writer.begin()
    fill(draft, n, processes)
    return writer.commit(draft)


def make_recording(name, path, frames):
    """Publishes `frames` frames and records each through the C recorder."""
    with make_writer(name, slot_count=4) as writer, keplershm.Reader(name, writer_grace_s=0) as reader, \
            keplershm.Recorder(path) as recorder:
        for n in range(1, frames + 1):
            publish(writer, n)
            rc, missed = recorder.append_next(reader, 1000)
            assert rc == 0 and missed == 0, (rc, missed)
    return path
