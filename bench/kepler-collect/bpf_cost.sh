#!/usr/bin/env bash
# bpf_cost.sh — what the eBPF program costs the scheduler's hottest path.
#
#   sudo bench/kepler-collect/bpf_cost.sh [BUILD_DIR=build] [RUNS=7] [LOOPS=200000] [CPU=1]
#
# 1. Slowdown: `perf bench sched pipe` pinned to one CPU (two tasks ping-ponging through a pipe: two
#    context switches per round trip), in turn without any program, with only an empty program on
#    sched_switch (kepler_attach_floor: what attaching anything costs here) and with kepler-collect
#    running (bpf_stats off, so only the programs themselves are measured). Median of RUNS each.
# 2. ns per program run: one more run with kernel.bpf_stats_enabled=1 and both loaded, then
#    run_time_ns / run_cnt of each attached kepler_* program (bpftool); the empty program's figure is
#    the floor (dispatch and bpf_stats' own clock reads). The previous sysctl value is restored on exit.
set -euo pipefail
build=${1:-build}
runs=${2:-7}
loops=${3:-200000}
cpu=${4:-1}
collector="$build/bin/kepler-collect"
floor="$build/bin/kepler_attach_floor"
name="kc-bpf-cost-$$"
[[ -x $collector ]] || { echo "bpf_cost: $collector not found (build first)" >&2; exit 1; }
[[ -x $floor ]] || { echo "bpf_cost: $floor not found (build the benches first)" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "bpf_cost: needs root (eBPF and bpf_stats)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bpf_cost: perf not found (linux-perf)" >&2; exit 1; }

stats_before=$(sysctl -n kernel.bpf_stats_enabled)
collector_pid=
floor_pid=
cleanup() {
    sysctl -qw kernel.bpf_stats_enabled="$stats_before"
    [[ -n $collector_pid ]] && kill "$collector_pid" 2>/dev/null && wait "$collector_pid" 2>/dev/null
    [[ -n $floor_pid ]] && kill "$floor_pid" 2>/dev/null && wait "$floor_pid" 2>/dev/null
    true
}
trap cleanup EXIT

pipe_usecs() { taskset -c "$cpu" perf bench sched pipe -l "$loops" | awk '/usecs\/op/ {print $1}'; }

start_collector() {
    "$collector" --shm-name "$name" --interval 1s --kube off --log-level warning &
    collector_pid=$!
    for _ in $(seq 500); do [[ -e /dev/shm/$name ]] && return; sleep 0.01; done
    echo "bpf_cost: collector did not start" >&2; exit 1
}
stop_collector() { kill "$collector_pid"; wait "$collector_pid" || true; collector_pid=; }

start_floor() {
    coproc FLOOR { exec "$floor"; }
    floor_pid=$FLOOR_PID
    local line
    read -r line <&"${FLOOR[0]}" && [[ $line == attached ]] || { echo "bpf_cost: $floor did not attach" >&2; exit 1; }
}
stop_floor() { kill "$floor_pid"; wait "$floor_pid" || true; floor_pid=; }

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
minimum() { sort -g | head -1; }

sysctl -qw kernel.bpf_stats_enabled=0
without=() empty=() with=()
for _ in $(seq "$runs"); do
    without+=("$(pipe_usecs)")
    start_floor
    empty+=("$(pipe_usecs)")
    stop_floor
    start_collector
    with+=("$(pipe_usecs)")
    stop_collector
done
base=$(printf '%s\n' "${without[@]}" | median)
floored=$(printf '%s\n' "${empty[@]}" | median)
loaded=$(printf '%s\n' "${with[@]}" | median)
base_min=$(printf '%s\n' "${without[@]}" | minimum)
floored_min=$(printf '%s\n' "${empty[@]}" | minimum)
loaded_min=$(printf '%s\n' "${with[@]}" | minimum)

start_floor
start_collector
sysctl -qw kernel.bpf_stats_enabled=1
pipe_usecs >/dev/null
per_run=$(bpftool prog show --json | /usr/bin/python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("name", "").startswith("kepler_") and p.get("run_cnt", 0) > 0:
        print(p["name"], p["run_cnt"], round(p["run_time_ns"] / p["run_cnt"]))')
sysctl -qw kernel.bpf_stats_enabled="$stats_before"
stop_collector
stop_floor

echo "perf bench sched pipe -l $loops pinned to CPU $cpu, median of $runs (usecs/op):"
echo "  without:       ${without[*]}"
echo "  empty program: ${empty[*]}"
echo "  with:          ${with[*]}"
report() {  # label without empty with
    awk -v l="$1" -v a="$2" -v e="$3" -v b="$4" 'BEGIN {
        printf "  %-7s without %.3f, empty program %.3f (%+.1f%%), with %.3f usecs/op: %+.1f%% (%+.1f%% over the empty program)\n",
               l, a, e, (e - a) / a * 100, b, (b - a) / a * 100, (b - e) / a * 100 }'
}
report median: "$base" "$floored" "$loaded"
report best: "$base_min" "$floored_min" "$loaded_min"
echo "ns per run (kernel.bpf_stats_enabled=1), program runs ns/run (kepler_floor_switch: the empty program):"
echo "$per_run" | sed 's/^/  /'
echo "load average during the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
