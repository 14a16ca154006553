#!/usr/bin/env bash
# gpu_cost.sh — what GPUs cost the collector, side by side in one run:
#
#   bench/kepler-collect/gpu_cost.sh [BUILD_DIR=build] [SECONDS=120]
#
# Starts 50 idle processes and two collectors at a 1 s interval on procfs at the same time: one with the
# fake libnvidia-ml.so.1 of tests/fakes/nvml (8 GPUs, each listing the 50 processes as compute processes
# with utilization samples every 100 ms: 400 (process, GPU) records a frame) and one with --gpu off. After
# a 5 s warm-up it measures each one's CPU time over SECONDS (utime+stime, as % of one core) and prints
# the difference. The fake answers from memory: the real driver's own time inside NVML is not in this
# figure (it needs a GPU machine).
set -euo pipefail
source "$(dirname "$0")/side_by_side.sh"
build=${1:-build}
seconds=${2:-120}
collector="$build/bin/kepler-collect"
fake="$build/tests/fakes/nvml/current/libnvidia-ml.so.1"
for b in "$collector" "$fake"; do
    [[ -e $b ]] || { echo "gpu_cost: build kepler-collect and fake_nvml first ($b)" >&2; exit 1; }
done
work=$(mktemp -d)
sleepers=() with_pid= without_pid=
cleanup() {
    for p in $with_pid $without_pid "${sleepers[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 50); do sleep 100000 & sleepers+=($!); done
{
    printf '{"devices": ['
    for g in $(seq 0 7); do
        ((g > 0)) && printf ','
        printf '{"power_w": %d, "processes": [' $((200 + g * 10))
        for i in "${!sleepers[@]}"; do
            ((i > 0)) && printf ','
            printf '{"pid": %d, "type": "compute", "used_memory_bytes": 1073741824, "sm_util": %d}' "${sleepers[$i]}" $((i % 100 + 1))
        done
        printf ']}'
    done
    printf ']}\n'
} > "$work/scenario.json"

common=(--interval 1s --source procfs --kube off --log-level warning --sysfs-root "$work/no-sys")
FAKE_NVML_SCENARIO="$work/scenario.json" "$collector" --shm-name "kc-gpu-$$" "${common[@]}" --nvml-library "$fake" &
with_pid=$!
"$collector" --shm-name "kc-nogpu-$$" "${common[@]}" --gpu off &
without_pid=$!
compare_cpu "$with_pid" "$without_pid" "$seconds" "with 8 fake GPUs x 50 GPU processes" "with --gpu off"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
