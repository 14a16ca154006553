#!/usr/bin/env python3
"""How much of a node's CPU time the collector's frames leave unexplained, and whether each process gets
its true share: the attribution truth of issue 18, measured side by side for several collector builds.

    sudo python3 bench/kepler-collect/node_time_truth.py base=/path/old/kepler-collect new=build/bin/kepler-collect
        [--seconds 60] [--scenarios quiet,periodic,light] [--source bpf]

For each scenario and collector (run one after the other, never together) it publishes 1 s frames for
--seconds and reports over the frames after the first:
  - unaccounted: the UNACCOUNTED record's CPU time less the kernel's own (irq+softirq+steal), as a share of
    node busy time — what energy attribution would give to nobody;
  - kernel: irq+softirq+steal as a share of node busy time (labelled `kernel_time` by kepler-estimate);
  - zero-busy frames: frames whose node busy time was exactly 0 while processes ran;
  - per child (periodic scenarios): its share of the frames' node busy time next to its true share: its
    scheduler clock (/proc/<pid>/schedstat) over the kernel's idle clock (elapsed × CPUs − /proc/stat idle
    and iowait), both read at the same two instants, independent of the collector.
Scenarios: quiet (nothing added), periodic (three 10 ms busy/sleep loops at 60/30/10 % of CPU 1: they wake
on the tick, which /proc/stat's sampling overcounts), light (the same at 5/2/1 %).
Needs root (eBPF) and the Python package (bindings/python; KEPLERSHM_LIBRARY names the library).
"""
import argparse
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))
from keplershm import Reader  # noqa: E402

SCENARIOS = {"quiet": [], "periodic": [0.6, 0.3, 0.1], "light": [0.05, 0.02, 0.01]}
PERIOD_S = 0.010


def duty_loop(duty):
    """Busy for duty × 10 ms of its own CPU time, then asleep for the rest of the 10 ms, forever."""
    os.sched_setaffinity(0, {os.cpu_count() - 1})
    busy, idle = duty * PERIOD_S, (1 - duty) * PERIOD_S
    while True:
        start = time.thread_time()
        while time.thread_time() - start < busy:
            pass
        time.sleep(idle)


def schedstat_ns(pid):
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def kernel_idle_ns():
    """Σ idle + iowait of /proc/stat's CPU lines in ns (USER_HZ ticks)."""
    total = 0
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3] != " ":
                fields = line.split()
                total += int(fields[4]) + int(fields[5])
    return total * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def busy_of(frame):
    return sum(int(c["user_ns"] + c["nice_ns"] + c["system_ns"] + c["irq_ns"] + c["softirq_ns"] + c["steal_ns"])
               for c in frame.cpus)


def kernel_of(frame):
    return sum(int(c["irq_ns"] + c["softirq_ns"] + c["steal_ns"]) for c in frame.cpus)


def measure(collector, source, seconds, duties):
    children = []
    for duty in duties:
        pid = os.fork()
        if pid == 0:
            try:
                duty_loop(duty)
            finally:
                os._exit(0)
        children.append(pid)
    name = "truth-%d" % os.getpid()
    proc = subprocess.Popen([collector, "--shm-name", name, "--interval", "1s", "--source", source, "--kube", "off",
                             "--log-level", "warning", "--frames", str(seconds + 2)])
    try:
        return read_run(name, seconds, children)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def read_run(name, seconds, children):
    for _ in range(500):
        if os.path.exists("/dev/shm/" + name):
            break
        time.sleep(0.01)
    totals = {"busy": 0, "processes": 0, "unaccounted": 0, "kernel": 0, "zero_busy_frames": 0, "frames": 0}
    child_ns = {pid: 0 for pid in children}
    start = None
    with Reader(name) as reader:
        for frame in reader.frames(timeout=5):
            if start is None:  # the first frame holds the start-up: the run starts at its end
                start = (time.monotonic_ns(), kernel_idle_ns(), {pid: schedstat_ns(pid) for pid in children})
                continue
            busy = busy_of(frame)
            processes = sum(int(p["cpu_time_ns"]) for p in frame.processes)
            totals["busy"] += busy
            totals["processes"] += processes
            totals["kernel"] += kernel_of(frame)
            totals["unaccounted"] += int(frame.unaccounted["cpu_time_ns"])
            totals["zero_busy_frames"] += busy == 0 and processes > 0
            totals["frames"] += 1
            for p in frame.processes:
                if int(p["pid"]) in child_ns:
                    child_ns[int(p["pid"])] += int(p["cpu_time_ns"])
            if totals["frames"] >= seconds:
                break
    end = (time.monotonic_ns(), kernel_idle_ns(), {pid: schedstat_ns(pid) for pid in children})
    true_busy = (end[0] - start[0]) * os.cpu_count() - (end[1] - start[1])
    shares = [(child_ns[pid] / max(totals["busy"], 1), (end[2][pid] - start[2][pid]) / max(true_busy, 1))
              for pid in children]
    return totals, shares


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("collectors", nargs="+", help="LABEL=PATH of a kepler-collect binary")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--scenarios", default="quiet,periodic,light")
    parser.add_argument("--source", default="bpf", choices=["bpf", "procfs"])
    args = parser.parse_args()
    builds = [c.split("=", 1) for c in args.collectors]
    print("| scenario | collector | unaccounted % of busy | kernel % of busy | zero-busy frames | "
          "children: frame share / true share (points off) |")
    print("|---|---|---|---|---|---|")
    for scenario in args.scenarios.split(","):
        for label, path in builds:
            totals, shares = measure(path, args.source, args.seconds, SCENARIOS[scenario])
            busy = max(totals["busy"], 1)
            unexplained = max(totals["unaccounted"] - totals["kernel"], 0)
            children = ", ".join("%.1f/%.1f (%+.1f)" % (100 * s, 100 * t, 100 * (s - t)) for s, t in shares) or "—"
            print("| %s | %s | %.2f | %.2f | %d of %d | %s |" % (
                scenario, label, 100 * unexplained / busy, 100 * totals["kernel"] / busy,
                totals["zero_busy_frames"], totals["frames"], children), flush=True)


if __name__ == "__main__":
    main()
