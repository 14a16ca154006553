#!/usr/bin/env bash
# README command (1): installs everything, builds, and runs the main job on this machine: kepler-collect
# (eBPF as root, /proc otherwise) publishing frames into /dev/shm/keplershm, and kepler-estimate reading
# them, showing the top processes and containers by watts and serving Prometheus metrics on :9102.
# Stops both on Ctrl-C. KEPLERSHM_RUN_SECONDS=N stops after N seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) -eq 0 ]]; then
  bash scripts/setup.sh
else
  bash scripts/setup.sh || echo "run.sh: not root: skipping package installation, building with what is installed"
fi
if [[ $(id -u) -eq 0 && -d /sys/kernel/tracing && ! -e /sys/kernel/tracing/events ]]; then
  mount -t tracefs tracefs /sys/kernel/tracing || true
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)" --target kepler-collect kepler-estimate

segment=${KEPLERSHM_SEGMENT:-keplershm}
log=$(mktemp /tmp/kepler-collect.XXXXXX.log)
./build/bin/kepler-collect --shm-name "$segment" --interval 1s 2>"$log" &
collector=$!
trap 'kill $collector 2>/dev/null; wait $collector 2>/dev/null || true' EXIT INT TERM
echo "run.sh: kepler-collect running (pid $collector, log $log); metrics on http://localhost:9102/metrics"

duration=()
[[ -n ${KEPLERSHM_RUN_SECONDS:-} ]] && duration=(--duration "$KEPLERSHM_RUN_SECONDS")
./build/bin/kepler-estimate --shm-name "$segment" --listen 0.0.0.0:9102 --top "${duration[@]}"
