#!/usr/bin/env bash
# README command (2): installs everything, builds, and runs every test (unit, multi-process, BPF,
# Python, end-to-end), then the sanitizer builds. Run as root on Debian 12; CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

bash scripts/setup.sh
# BPF tests need tracefs (tracepoint attach); mount it where a minimal system has not.
if [[ $(id -u) -eq 0 && -d /sys/kernel/tracing && ! -e /sys/kernel/tracing/events ]]; then
  mount -t tracefs tracefs /sys/kernel/tracing || echo "test.sh: could not mount tracefs; BPF tests will skip"
fi

echo "== build (RelWithDebInfo) and every test"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 600)

echo "== ASan + UBSan: the protocol library's unit, hostile-input and stress tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKEPLERSHM_SANITIZE=address,undefined \
      -DKEPLERSHM_COMPONENTS="" -DKEPLERSHM_BUILD_BENCHMARKS=OFF
cmake --build build-asan -j"$jobs"
(cd build-asan && KEPLERSHM_STRESS_SECONDS=5 ctest --output-on-failure -j"$jobs" --timeout 600)

echo "test.sh: all tests passed"
