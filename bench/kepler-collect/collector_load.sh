#!/usr/bin/env bash
# collector_load.sh — the collector's own CPU and memory with many live processes.
#
#   sudo bench/kepler-collect/collector_load.sh [BUILD_DIR=build] [PROCESSES=1000] [SECONDS=60] [SOURCE=bpf]
#
# Starts PROCESSES processes that each wake about once a second and burn ~200 µs
# (kepler_collect_load_processes), runs kepler-collect at a 1 s interval, and after a 5 s warm-up
# measures over SECONDS: its CPU time (utime+stime of /proc/<pid>/stat) as % of one core, its RSS at
# the end and its peak RSS (VmHWM), and the segment size (which is shared memory, not RSS).
set -euo pipefail
build=${1:-build}
processes=${2:-1000}
seconds=${3:-60}
source=${4:-bpf}
collector="$build/bin/kepler-collect"
load="$build/bin/kepler_collect_load_processes"
name="kc-load-$$"
[[ -x $collector && -x $load ]] || { echo "collector_load: build kepler-collect and kepler_collect_load_processes first" >&2; exit 1; }

load_pid= collector_pid=
cleanup() {
    [[ -n $collector_pid ]] && kill "$collector_pid" 2>/dev/null && wait "$collector_pid" 2>/dev/null
    [[ -n $load_pid ]] && kill "$load_pid" 2>/dev/null && wait "$load_pid" 2>/dev/null
    true
}
trap cleanup EXIT

"$load" "$processes" > /dev/null &
load_pid=$!
sleep 3
"$collector" --shm-name "$name" --interval 1s --source "$source" --kube off --log-level warning &
collector_pid=$!
sleep 5
ticks() { awk '{print $14 + $15}' "/proc/$collector_pid/stat"; }
t0=$(ticks)
sleep "$seconds"
t1=$(ticks)
hz=$(getconf CLK_TCK)
status="/proc/$collector_pid/status"
rss=$(awk '/^VmRSS/ {print $2}' "$status")
hwm=$(awk '/^VmHWM/ {print $2}' "$status")
anon=$(awk '/^RssAnon/ {print $2}' "$status")
file=$(awk '/^RssFile/ {print $2}' "$status")
shmem=$(awk '/^RssShmem/ {print $2}' "$status")
segment=$(stat -c %s "/dev/shm/$name")
live=$(ls -d /proc/[0-9]* | wc -l)
awk -v t="$((t1 - t0))" -v hz="$hz" -v s="$seconds" -v rss="$rss" -v hwm="$hwm" -v seg="$segment" \
    -v live="$live" -v src="$source" -v anon="$anon" -v file="$file" -v shmem="$shmem" 'BEGIN {
    printf "source %s, %d live processes, %d s at 1 s interval:\n", src, live, s
    printf "  CPU %.3f s = %.2f%% of one core\n", t / hz, t / hz / s * 100
    printf "  RSS %.1f MB at the end (anonymous %.1f, files %.1f, segment pages %.1f), peak %.1f MB\n", rss / 1024, anon / 1024, file / 1024, shmem / 1024, hwm / 1024
    printf "  RSS besides the segment: %.1f MB; segment size %.1f MB (shared memory)\n", (rss - shmem) / 1024, seg / 1048576
}'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
