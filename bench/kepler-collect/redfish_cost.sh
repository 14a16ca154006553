#!/usr/bin/env bash
# redfish_cost.sh — what platform power from a BMC costs the collector, side by side in one run:
#
#   bench/kepler-collect/redfish_cost.sh [BUILD_DIR=build] [SECONDS=120] [POLL=2s]
#
# Starts the fake BMC (tests/fakes/fake_bmc: HTTPS with its own certificate, a Redfish session, two power
# supplies) and two collectors at a 1 s interval on procfs at the same time, one reading the BMC every
# POLL and one without; after a 5 s warm-up measures each one's CPU time over SECONDS (utime+stime, as %
# of one core) and prints the difference; then how long a BMC reading waits for the frame that carries
# it (bench/kepler-collect/platform_latency.cpp).
set -euo pipefail
source "$(dirname "$0")/side_by_side.sh"
build=${1:-build}
seconds=${2:-120}
poll=${3:-2s}
collector="$build/bin/kepler-collect"
fake="$build/bin/fake_bmc"
latency="$build/bin/kepler_collect_platform_latency"
for b in "$collector" "$fake" "$latency"; do
    [[ -x $b ]] || { echo "redfish_cost: build kepler-collect, fake_bmc and kepler_collect_platform_latency first ($b)" >&2; exit 1; }
done
work=$(mktemp -d)
bmc_pid= with_pid= without_pid=
cleanup() {
    for p in $with_pid $without_pid; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    exec 3>&- 2>/dev/null || true
    [[ -n $bmc_pid ]] && wait "$bmc_pid" 2>/dev/null
    rm -rf "$work"
    true
}
trap cleanup EXIT

mkdir -p "$work/bmc"
mkfifo "$work/bmc-in"
"$fake" --dir "$work/bmc" < "$work/bmc-in" > "$work/bmc-out" &
bmc_pid=$!
exec 3> "$work/bmc-in"  # the fake BMC runs until its stdin closes
for _ in $(seq 50); do [[ $(wc -l < "$work/bmc-out") -ge 2 ]] && break; sleep 0.1; done
url=$(sed -n 1p "$work/bmc-out")
[[ -n $url ]] || { echo "redfish_cost: the fake BMC did not start" >&2; exit 1; }
ca=$(sed -n 2p "$work/bmc-out")
printf 'admin\nsecret\n' > "$work/credentials"

common=(--interval 1s --source procfs --kube off --log-level warning --sysfs-root "$work/no-sys")
"$collector" --shm-name "kc-redfish-$$" "${common[@]}" --redfish-endpoint "$url" --redfish-ca-file "$ca" \
    --redfish-credentials-file "$work/credentials" --redfish-poll "$poll" &
with_pid=$!
"$collector" --shm-name "kc-none-$$" "${common[@]}" &
without_pid=$!
compare_cpu "$with_pid" "$without_pid" "$seconds" "with a Redfish BMC polled every $poll" "without"
"$latency" "kc-redfish-$$" 30
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
